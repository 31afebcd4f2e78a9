package control

import (
	"bytes"
	"testing"
)

// TestSealChunkClearsTheRest: the daemon fills an answer chunk in a buffer
// that may hold anything (another reader's bytes); the whole chunk goes
// back to the caller, so everything past the count must be zero.
func TestSealChunkClearsTheRest(t *testing.T) {
	b := bytes.Repeat([]byte{0xa5}, ChunkSize)
	n := copy(ChunkPayload(b), "{}\n")
	SealChunk(b, n)
	got, err := DecodeChunk(b)
	if err != nil || string(got) != "{}\n" {
		t.Fatalf("DecodeChunk: %q, %v; want the 3 bytes", got, err)
	}
	if rest := b[chunkHeader+n:]; !bytes.Equal(rest, make([]byte, len(rest))) {
		t.Errorf("%d bytes past the count are not zero", len(rest)-bytes.Count(rest, []byte{0}))
	}
}
