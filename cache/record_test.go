package cache

import "testing"

func TestObjectRecordRoundTrip(t *testing.T) {
	in := objectRecord{
		objectMeta:  objectMeta{Source: "s3://b/p/", Key: "dir/ünï 文件.bin", Size: 123456789, Version: "abc-1", ChunkSize: 4 << 20},
		CachedBytes: 4 << 20,
		Accessed:    1_790_000_000,
	}
	var out objectRecord
	if err := out.unmarshal(in.marshal()); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
	b := in.marshal()
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-3]} {
		if err := out.unmarshal(bad); err == nil {
			t.Errorf("unmarshal(%x) accepted a truncated or unknown record", bad)
		}
	}
	in.CachedBytes = in.Size + 1
	if err := out.unmarshal(in.marshal()); err == nil {
		t.Error("accepted cached bytes beyond the object's size")
	}
}
