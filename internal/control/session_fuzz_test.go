package control

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzDecodeChunk: what a client's IoctlSend carries is outside input.
// A chunk decodes only as what it says it holds, and a chunk PutChunk
// made decodes to the bytes it took.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(uint32(5), uint32(0), []byte("hello"), ChunkSize)
	f.Add(uint32(ChunkData+1), uint32(0), []byte{}, ChunkSize)
	f.Add(uint32(0), uint32(1), []byte{}, ChunkSize)
	f.Add(uint32(3), uint32(0), []byte("abc"), 11)
	f.Fuzz(func(t *testing.T, n, reserved uint32, data []byte, size int) {
		if size < 0 || size > 2*ChunkSize {
			return
		}
		b := make([]byte, max(size, chunkHeader))
		binary.LittleEndian.PutUint32(b, n)
		binary.LittleEndian.PutUint32(b[4:], reserved)
		copy(b[chunkHeader:], data)
		b = b[:size]
		got, err := DecodeChunk(b)
		ok := size == ChunkSize && reserved == 0 && n <= ChunkData
		if (err == nil) != ok {
			t.Fatalf("DecodeChunk(size %d, count %d, reserved %d): %v; want ok=%v", size, n, reserved, err, ok)
		}
		if ok && (len(got) != int(n) || !bytes.Equal(got, b[chunkHeader:chunkHeader+n])) {
			t.Fatalf("DecodeChunk gave %d bytes; want the %d it counts", len(got), n)
		}

		c := make([]byte, ChunkSize)
		c[5] = 0xff // PutChunk clears what it reserves
		took := PutChunk(c, data)
		if took != min(len(data), ChunkData) {
			t.Fatalf("PutChunk took %d of %d bytes", took, len(data))
		}
		back, err := DecodeChunk(c)
		if err != nil || !bytes.Equal(back, data[:took]) {
			t.Fatalf("a chunk PutChunk made decodes to %d bytes, %v; want the %d it took", len(back), err, took)
		}
	})
}
