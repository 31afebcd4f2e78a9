package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestConfigurationDoc: docs/configuration.md lists every flag of mount
// (a superset of daemon's) with its environment variable and, but for -d
// and -o, its mount option: a flag added without its line fails here.
func TestConfigurationDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	cmd, _ := mountCmdForTest()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		want := []string{"`--" + f.Name}
		if f.Name != "options" {
			want = append(want, "`"+envName(f.Name)+"`")
		}
		if f.Name != "options" && f.Name != "daemon" {
			want = append(want, "`"+strings.ReplaceAll(f.Name, "-", "_"))
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("docs/configuration.md does not mention %s (flag --%s)", w, f.Name)
			}
		}
	})
}
