package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/daemon"
	"github.com/dsmount/dsmount/internal/units"
)

// renderEvent shows an event as the commands do (warm's progress bar,
// its progress line without a terminal, and totals, stats' tables), to w.
func renderEvent(w io.Writer, ev control.Event) error {
	if ev.Warm != nil {
		bar := progressBar{out: w}
		bar.draw(*ev.Warm)
		bar.draw(*ev.Warm) // again, as the next report would
		bar.clear()
		io.WriteString(w, progressLine("/mnt/x", ev.Warm, 0, 0))
		var total control.WarmProgress
		addProgress(&total, *ev.Warm)
	}
	if ev.Plan != nil {
		io.WriteString(w, units.Bytes(ev.Plan.Bytes-ev.Plan.BytesCached)+units.Bytes(ev.Plan.CacheFree))
	}
	if ev.Stats != nil {
		var r control.StatsReport
		if err := json.Unmarshal(ev.Stats, &r); err != nil {
			return err
		}
		printStats(w, r)
	}
	return nil
}

// FuzzControlAnswer: whatever the daemon's answer holds (a daemon of
// another version, a truncated line, counts that don't add up: bytes
// done past the total, negative sizes), the CLI reads it and shows it
// without a panic, and any error it reports is one line.
func FuzzControlAnswer(f *testing.F) {
	stats, err := json.Marshal(control.StatsReport{DaemonPid: 7, Mounts: []control.MountStats{{Mountpoint: "/mnt/x", Jobs: []control.JobStats{{Name: "j\nk", Declared: 3}}}},
		Cache: control.CacheStats{Policy: daemon.PolicyOrder, Capacity: 10, Used: 20}, PageCache: control.PageCache{Samples: 1}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"type":"result","order":{"job":"j","epoch":1,"declared":3,"skipped_examples":[]}}` + "\n",
		`{"type":"plan","plan":{"files":1,"bytes":10,"bytes_cached":20,"cache_free":-1}}` + "\n" + `{"type":"progress","warm":{"bytes":10,"bytes_done":25,"seconds":1}}` + "\n",
		`{"type":"progress","warm":{"bytes":10,"bytes_done":-5,"seconds":-1,"bytes_fetched":-9223372036854775808}}`,
		`{"type":"result","stats":` + string(stats) + "}\n",
		`{"type":"result","stats":{"mounts":null,"cache":{"capacity":-1}}}`,
		`{"type":"error","error":"two\nlines\r"}` + "\n",
		`{"type":"error"}`,
		"{\"type\":\"progress\"\n", "\n", "", "\x00", "null\n", `{"type":"result","stats":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := control.ReadAnswer(bytes.NewReader(b), "/mnt/x", func(ev control.Event) error { return renderEvent(io.Discard, ev) })
		if err == nil {
			return
		}
		if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("answer %q: error %q, want one line", b, msg)
		}
	})
}
