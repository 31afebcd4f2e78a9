package cache_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dsmount/dsmount/backend/posix"
	"github.com/dsmount/dsmount/cache"
)

// A Cache keeps chunks of a backend's objects on local disk; a Source
// reads an object through it, from the cache where it holds the chunk and
// from the backend (storing what it fetched) where not.
func Example() {
	data, err := os.MkdirTemp("", "cache-example-data")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(data)
	if err := os.WriteFile(filepath.Join(data, "a.txt"), []byte("hello, dataset"), 0o644); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cache-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := cache.Open(dir, cache.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	b, err := posix.New(data)
	if err != nil {
		log.Fatal(err)
	}
	src := c.Source(b)
	defer src.Close()

	ctx := context.Background()
	obj, err := b.Stat(ctx, "a.txt")
	if err != nil {
		log.Fatal(err)
	}
	p := make([]byte, obj.Size)
	if _, err := src.ReadAt(ctx, obj, p, 0); err != nil {
		log.Fatal(err)
	}
	c.Settle() // the fetched chunk is stored after the read returns
	fmt.Printf("%q, cached: %v\n", p, src.Cached(obj))
	// Output:
	// "hello, dataset", cached: true
}
