package cache

import "testing"

func TestObjectRecordRoundTrip(t *testing.T) {
	in := objectRecord{
		objectMeta:  objectMeta{Source: "s3://b/p/", Key: "dir/ünï 文件.bin", Size: 123456789, Version: "abc-1", ChunkSize: 4 << 20},
		CachedBytes: 4 << 20,
		Accessed:    1_790_000_000,
		Pack:        0xfedcba9876543210,
		PackOff:     3 << 30,
	}
	var out objectRecord
	if err := out.unmarshal(in.marshal()); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
	b := in.marshal()
	for _, bad := range [][]byte{nil, {2}, {3}, b[:len(b)-3]} {
		if err := out.unmarshal(bad); err == nil {
			t.Errorf("unmarshal(%x) accepted a truncated or unknown record", bad)
		}
	}
	in.CachedBytes = in.Size + 1
	if err := out.unmarshal(in.marshal()); err == nil {
		t.Error("accepted cached bytes beyond the object's size")
	}
}

// TestObjectRecordVersion1 reads a record written before packs: no
// location, the object's bytes are in its own file.
func TestObjectRecordVersion1(t *testing.T) {
	in := objectRecord{
		objectMeta:  objectMeta{Source: "file:///d", Key: "a/b", Size: 1000, Version: "v", ChunkSize: 4 << 20},
		CachedBytes: 1000,
		Accessed:    7,
	}
	b := in.marshal()
	b[0] = 1
	// Version 1 ends after Accessed: drop the location fields (Pack 0 and
	// PackOff 0 take one byte each).
	b = b[:len(b)-2]
	var out objectRecord
	if err := out.unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("version 1: %+v != %+v", out, in)
	}
}
