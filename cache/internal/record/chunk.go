package record

import (
	"encoding/binary"
	"hash/crc32"
)

// Cached bytes are checked in blocks: every chunk's bytes are split into
// check blocks of CheckBlock bytes (the last one of a chunk shorter), and
// each block's CRC32C is kept in the chunk's record. A read of a cached
// chunk reads the blocks it touches and checks each before serving any
// byte of them. Checking whole chunks instead would make a small read of a
// large chunk read and checksum all of it (docs/guarantees.md). At 128 KiB
// a kernel READ touches one block more at most, and a file of up to 128
// KiB, the common small sample, is one block, one CRC.
const CheckBlock = 128 << 10

// BlocksIn is the number of check blocks of a chunk of n bytes.
func BlocksIn(n int64) int { return int((n + CheckBlock - 1) / CheckBlock) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BlockSums returns the CRC32C of each check block of data, in order.
func BlockSums(data []byte) []uint32 {
	sums := make([]uint32, BlocksIn(int64(len(data))))
	for i := range sums {
		sums[i] = crc32.Checksum(data[i*CheckBlock:min((i+1)*CheckBlock, len(data))], castagnoli)
	}
	return sums
}

// SumsMatch checks buf, consecutive check blocks, against their sums (one
// sum for the whole of buf when there is one).
func SumsMatch(buf []byte, sums []uint32) bool {
	if len(sums) == 1 {
		return crc32.Checksum(buf, castagnoli) == sums[0]
	}
	for i, want := range sums {
		if crc32.Checksum(buf[i*CheckBlock:min((i+1)*CheckBlock, len(buf))], castagnoli) != want {
			return false
		}
	}
	return true
}

// Chunk is a durable chunk's length and the CRC32C (Castagnoli) of each of
// its check blocks. A chunk of one block is stored as before blocks, CRC
// then length, 8 bytes; one of several as its length then its sums. An
// 8-byte record of a chunk of several blocks is from before blocks: its
// one CRC is the whole chunk's (Whole).
type Chunk struct {
	Len   uint32
	Sums  []uint32
	Whole bool // read back only: Sums[0] is the whole chunk's CRC32C
}

// Marshal encodes c.
func (c Chunk) Marshal() []byte {
	if len(c.Sums) == 1 {
		b := binary.BigEndian.AppendUint32(nil, c.Sums[0])
		return binary.BigEndian.AppendUint32(b, c.Len)
	}
	b := make([]byte, 0, 4+4*len(c.Sums))
	b = binary.BigEndian.AppendUint32(b, c.Len)
	for _, s := range c.Sums {
		b = binary.BigEndian.AppendUint32(b, s)
	}
	return b
}

// Unmarshal decodes a chunk record.
func (c *Chunk) Unmarshal(b []byte) error {
	if len(b) == 8 {
		c.Sums = []uint32{binary.BigEndian.Uint32(b)}
		c.Len = binary.BigEndian.Uint32(b[4:])
		c.Whole = BlocksIn(int64(c.Len)) > 1
		if c.Len == 0 {
			// No chunk is empty (an empty object has none), and a
			// sum of no block is no record this dsmount wrote.
			return ErrCorrupt
		}
		return nil
	}
	if len(b) < 12 || len(b)%4 != 0 {
		return ErrCorrupt
	}
	c.Len = binary.BigEndian.Uint32(b)
	c.Whole = false
	c.Sums = make([]uint32, (len(b)-4)/4)
	if BlocksIn(int64(c.Len)) != len(c.Sums) {
		return ErrCorrupt
	}
	for i := range c.Sums {
		c.Sums[i] = binary.BigEndian.Uint32(b[4+4*i:])
	}
	return nil
}
