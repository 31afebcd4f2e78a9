package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// TamperKinds are the faults TamperFile does to a cache file, as a disk
// clean-up tool, an admin, a second program or bit rot would:
//   - delete: the file is removed;
//   - replace: a new file of the same size, random bytes, renamed over it;
//   - truncate-extend: cut to 0 and extended back (zeros);
//   - flip: one byte in every 64 KiB flipped, in place.
var TamperKinds = []string{"delete", "replace", "truncate-extend", "flip"}

// TamperFile does one fault of TamperKinds to the file at path, with junk
// bytes from r, and drops what is left of it from the page cache.
func TamperFile(path, fault string, r *rand.Rand) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	size := st.Size()
	junk := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b[:min(n, 64<<10)] {
			b[i] = byte(r.Uint32())
		}
		for i := int64(64 << 10); i < n; i += 64 << 10 {
			copy(b[i:], b[:64<<10])
		}
		return b
	}
	switch fault {
	case "delete":
		err = os.Remove(path)
	case "replace":
		// A new file of the same size renamed over the old one, as an
		// editor or a restore from backup would. It keeps the old one's
		// holes: a pack whose evicted slots were punched out may be
		// gigabytes long with little on disk, and junk written over the
		// holes would be space the daemon never took (the soak's bound
		// on the cache's disk use counts blocks).
		err = replaceKeepingHoles(path, size, junk)
	case "truncate-extend":
		if err = os.Truncate(path, 0); err == nil {
			err = os.Truncate(path, size)
		}
	case "flip":
		// Every 64 KiB, one byte flipped, in place.
		var f *os.File
		if f, err = os.OpenFile(path, os.O_RDWR, 0); err == nil {
			b := []byte{0}
			for off := int64(100); off < size && err == nil; off += 64 << 10 {
				if _, err = f.ReadAt(b, off); err == nil {
					b[0] ^= 0x5a
					_, err = f.WriteAt(b, off)
				}
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	default:
		err = fmt.Errorf("unknown fault %q", fault)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", fault, path, err)
	}
	if fault != "delete" {
		if err := DropPageCache(path); err != nil {
			return fmt.Errorf("dropping %s from the page cache: %w", path, err)
		}
	}
	return nil
}

// CacheFiles lists the regular files under cacheDir's subdirectories subs
// ("data": an object of several chunks per file; "packs": the pack files
// of the small objects). A missing subdirectory lists nothing.
func CacheFiles(cacheDir string, subs ...string) ([]string, error) {
	var files []string
	for _, sub := range subs {
		err := filepath.WalkDir(filepath.Join(cacheDir, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil // gone under the walk (evicted), or no such subdirectory
				}
				return err
			}
			if d.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// replaceKeepingHoles writes a file of size bytes with junk where the file
// at path has data and holes where it has holes, and renames it over path.
func replaceKeepingHoles(path string, size int64, junk func(int64) []byte) error {
	const seekData, seekHole = 3, 4 // SEEK_DATA, SEEK_HOLE (Linux)
	old, err := os.Open(path)
	if err != nil {
		return err
	}
	defer old.Close()
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	for off := int64(0); off < size; {
		start, err := old.Seek(off, seekData)
		if err != nil {
			break // ENXIO: no data past off
		}
		end, err := old.Seek(start, seekHole)
		if err != nil {
			end = size
		}
		for at := start; at < end; at += 8 << 20 {
			if _, err := f.WriteAt(junk(min(8<<20, end-at)), at); err != nil {
				f.Close()
				return err
			}
		}
		off = end
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	return err
}
