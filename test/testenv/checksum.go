package testenv

import (
	"hash/crc32"
	"io"
	"os"
	"sync"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksums reads every root/<p> whole with `readers` parallel readers and
// returns each file's size and CRC-32C.
func Checksums(root string, paths []string, readers int) (map[string]int64, map[string]uint32, error) {
	sizes := make(map[string]int64, len(paths))
	crcs := make(map[string]uint32, len(paths))
	var mu sync.Mutex
	err := ReadAllInOrder(root, paths, readers, func(p string, data []byte) error {
		c := crc32.Checksum(data, castagnoli)
		mu.Lock()
		sizes[p], crcs[p] = int64(len(data)), c
		mu.Unlock()
		return nil
	})
	return sizes, crcs, err
}

// CRCFile streams path in 1 MiB reads and returns its size and CRC-32C.
func CRCFile(path string) (int64, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	// Hide *os.File's WriterTo, so the reads are 1 MiB through a mount too.
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, 1<<20))
	return n, h.Sum32(), err
}
