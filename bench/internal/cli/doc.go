// Package cli is what every bench subcommand's command line shares: its
// flag set and --help text, the list flags several of them take, the
// timestamped progress lines they print, the errors bench's main turns into
// exit codes, and re-running this binary as a helper process.
package cli
