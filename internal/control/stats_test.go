package control

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestStatsWire pins the stats answer's wire: each object's keys, in the
// order encoding/json writes them, with every field set. A field renamed,
// dropped, added or moved fails here, so that it is a choice made with
// doc.go's rules on versions in mind (fields only added, with omitempty),
// and the clients (cmd/dsmount, python/dsmount, test/testenv) follow.
func TestStatsWire(t *testing.T) {
	for _, c := range []struct {
		v    any
		keys []string
	}{
		{StatsReport{}, []string{"daemon_pid", "mount", "mounts", "cache", "page_cache"}},
		{CacheStats{}, []string{"dir", "policy", "chunk_size", "hits", "misses", "bytes_from_cache", "bytes_from_backend",
			"bytes_fetched", "chunks_fetched", "ranges_fetched", "fetches_in_flight", "used", "capacity", "evictions", "streamed",
			"verify_failures", "sync_failures", "warm_chunks", "staged_pushed_out", "disk_full"}},
		{MountStats{}, []string{"mountpoint", "source", "files", "reads", "bytes_read", "read_errors", "lookups", "getattrs",
			"batched_reads", "fast_path", "hits", "misses", "bytes_from_cache", "bytes_from_backend", "jobs", "backend"}},
		{SourceStats{}, []string{"hits", "misses", "bytes_from_cache", "bytes_from_backend"}},
		{JobStats{}, []string{"mount", "name", "uid", "epoch", "declared", "next_declared", "read", "frontier", "window",
			"read_rate", "total_reads", "prefetched", "prefetch_hits", "stalls", "hit_rate", "stall_seconds",
			"prefetch_evicted", "prefetch_unseen", "admissions_refused", "evicted_in_window", "idle_seconds", "pushed"}},
		{RequestStats{}, []string{"gets", "hedges", "hedges_won", "first_byte_timeouts", "body_timeouts", "retries",
			"throttled", "first_byte_p99_ms", "timeout_ms", "hedge_ms"}},
		{PageCache{}, []string{"same_epoch", "earlier", "samples", "fill_and_hold"}},
		{Horizon{}, []string{"seconds", "unbounded"}},
	} {
		v := reflect.New(reflect.TypeOf(c.v))
		setAll(v.Elem())
		b, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		if got := objectKeys(t, b); !slices.Equal(got, c.keys) {
			t.Errorf("%T's keys on the wire:\n got %q\nwant %q", c.v, got, c.keys)
		}
	}
}

// setAll sets every exported field of v, through structs and slices (of
// one element), to a value that is not its zero.
func setAll(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setAll(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		setAll(v.Index(0))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1.5)
	default:
		panic("setAll: teach it " + v.Kind().String())
	}
}

// objectKeys are the keys of the JSON object b, in order.
func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object (%v)", b, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
