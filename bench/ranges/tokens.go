package ranges

import (
	"encoding/binary"
	"fmt"
	"os"
)

// The token file: uint16 tokens, little-endian (what np.memmap of
// dtype=np.uint16 reads on the machines this runs on), each a function of
// its index, so that the readers (reader.py) and the raw GETs (rawgets.go)
// check every token of any window without a copy of the file:
//
//	token[i] = ((i + seed) * 0x9E3779B97F4A7C15 mod 2^64) >> 48
//
// The top 16 bits of a 64-bit multiplicative hash: consecutive tokens
// differ, and a window read from the wrong offset (a whole block or chunk
// off, say) fails the check unless the offset's product happens to leave
// the top bits alone, about one offset in 65,536 and then only for
// windows that carry no bit into them.
const tokenMul = 0x9E3779B97F4A7C15

// tokenAt is the token at index i of the file of seed.
func tokenAt(seed, i uint64) uint16 { return uint16((i + seed) * tokenMul >> 48) }

// writeTokens writes a token file of size bytes (even) to path.
func writeTokens(path string, size int64, seed uint64) error {
	if size%2 != 0 {
		return fmt.Errorf("token file of %d bytes: not a whole number of uint16 tokens", size)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), size-off)]
		first := uint64(off / 2)
		for k := 0; k < len(p)/2; k++ {
			binary.LittleEndian.PutUint16(p[2*k:], tokenAt(seed, first+uint64(k)))
		}
		if _, err := f.Write(p); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// checkWindow checks a window of tokens read from byte offset 2*start:
// it returns an error naming the first wrong token, or a short window.
func checkWindow(seed, start uint64, p []byte, want int) error {
	if len(p) != 2*want {
		return fmt.Errorf("window at token %d: %d bytes, want %d", start, len(p), 2*want)
	}
	for k := 0; k < want; k++ {
		if got, exp := binary.LittleEndian.Uint16(p[2*k:]), tokenAt(seed, start+uint64(k)); got != exp {
			return fmt.Errorf("window at token %d: token %d is %d, want %d", start, start+uint64(k), got, exp)
		}
	}
	return nil
}
