package backend_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/posix"
)

// A Backend lists a dataset's objects and reads any of them at an offset,
// tied to the version it was listed at. Here a local directory's.
func Example() {
	dir, err := os.MkdirTemp("", "backend-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello, dataset"), 0o644); err != nil {
		log.Fatal(err)
	}

	var b backend.Backend
	if b, err = posix.New(dir); err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	err = b.List(ctx, func(obj backend.Object) error {
		p := make([]byte, 7)
		n, err := b.ReadAt(ctx, obj, p, 7)
		fmt.Printf("%s, %d bytes: %q at 7\n", obj.Key, obj.Size, p[:n])
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// a.txt, 14 bytes: "dataset" at 7
}
