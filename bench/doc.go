// Command bench runs dsmount's benchmarks, one subcommand each:
//
//	go run ./bench --help                 # the subcommands, a line each
//	go run ./bench SUBCOMMAND --help      # a subcommand's flags
//	go run ./bench order --isolate-backend --rounds 3
//
// Every benchmark measures its references in the same run and reports
// ratios to them: these machines are shared and noisy. Most need root
// (FUSE, drop_caches, cgroups) and the MinIO and toxiproxy binaries that
// test/run.sh installs (DSMOUNT_MINIO, DSMOUNT_TOXIPROXY). What each
// measures, and its current figures, are in bench/README.md.
//
// Each subcommand is a package of its own (bench/cold, bench/order, ...)
// with a Main(args) that parses its own flag set; what they share lives in
// bench/internal: cli (flags, exit codes, progress lines, helper
// processes), measure (rates, the store's raw-GET reference, CPU and GET
// accounting) and benchenv (MinIO behind toxiproxy, datasets, the dsmount
// binary).
package main
