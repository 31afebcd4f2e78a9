package fs

import (
	"fmt"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/internal/control"
)

// BenchmarkTable resolves ImageNet's path table (1,281,167 paths in 1,000
// directories), what a job's first declaration by index costs the daemon.
func BenchmarkTable(b *testing.B) {
	l := &backend.Listing{}
	var payload []byte
	for d := range 1000 {
		for f := range 1281 {
			key := fmt.Sprintf("train/n%08d/n%08d_%d.JPEG", d, d, f)
			l.Append(backend.Object{Key: key, Size: 110000, Version: "0123456789abcdef0123456789abcdef", ModTime: time.Unix(1700000000, 0)})
			payload = append(append(payload, key...), 0)
		}
	}
	m := tableMount(b, l)
	m.tree.lookup("train") // the path index is built on first use
	req := control.Request{Table: control.TableName(payload), TablePayload: payload}
	b.ResetTimer()
	for b.Loop() {
		m.tables = tables{}
		t, err := m.table(req)
		if err != nil || len(t.refs) != l.Len() || len(t.missing) != 0 {
			b.Fatalf("table: %v, %d missing", err, len(t.missing))
		}
	}
}
