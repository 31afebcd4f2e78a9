package test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestS3NoETagNeverMixes runs testPartCachedOverwrite against MinIO behind a
// proxy that hides every ETag, as some S3-compatible stores give none: the
// version is then the object's Last-Modified time, and an overwrite two
// seconds on must be told apart as surely as an ETag change. The daemon
// must also say, once, that it can't see changes within a second or two.
func TestS3NoETagNeverMixes(t *testing.T) {
	// A server of its own: the shared one would upload the whole shared
	// dataset first.
	m := testenv.StartMinIO(t)
	const bucket = "no-etag"
	m.CreateBucket(bucket)
	st := &etaglessStore{m: m, bucket: bucket, proxy: testenv.StartETagProxy(t, m.Endpoint())}
	testPartCachedOverwrite(t, st)

	// The first mount listed the bucket: it warns, once.
	if len(st.mounts) == 0 {
		t.Fatal("testPartCachedOverwrite mounted nothing")
	}
	var warned int
	for _, rec := range st.mounts[0].LogRecords("WARN") {
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "gives no ETags") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the mount through the ETag-less proxy logged the no-ETag warning %d times, want once; log:\n%s", warned, st.mounts[0].Stderr())
	}
}

// etaglessStore is a MinIO bucket mounted through a testenv.ETagProxy. An
// overwrite waits for the clock to pass the second after the object's
// Last-Modified first: within that the store itself gives nothing to tell
// two versions apart (a limit the daemon's warning states).
type etaglessStore struct {
	m      *testenv.MinIO
	bucket string
	proxy  *testenv.ETagProxy
	mounts []*testenv.Mount
}

func (s *etaglessStore) put(t *testing.T, key string, data []byte) {
	t.Helper()
	before, err := s.lastModified(t.Context(), key)
	var ae smithy.APIError
	if err != nil && !(errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey")) {
		t.Fatalf("HeadObject %s: %v", key, err)
	}
	if err == nil {
		// Later than the second after the listed one: a store may round
		// the listed time up (see the s3 backend's checkAnswer).
		err := testenv.WaitFor(5*time.Second, 10*time.Millisecond, "the clock to pass "+before.Format(time.RFC3339), func() (bool, error) {
			return time.Now().Truncate(time.Second).After(before.Truncate(time.Second).Add(time.Second)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.m.WithT(t).PutObject(s.bucket, key, data)
	if err == nil {
		after, err := s.lastModified(t.Context(), key)
		if err != nil {
			t.Fatalf("HeadObject %s after the overwrite: %v", key, err)
		}
		if !after.Truncate(time.Second).After(before.Truncate(time.Second).Add(time.Second)) {
			t.Fatalf("the overwrite of %s kept Last-Modified %v (was %v): the test needs a later second", key, after, before)
		}
	}
}

func (s *etaglessStore) lastModified(ctx context.Context, key string) (time.Time, error) {
	out, err := s.m.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return time.Time{}, err
	}
	return aws.ToTime(out.LastModified), nil
}

func (s *etaglessStore) mount(t *testing.T, mp, cacheDir string, extra ...string) *testenv.Mount {
	args := append([]string{"--cache-dir", cacheDir, "--s3-endpoint", s.proxy.Endpoint(), "--s3-path-style"}, extra...)
	d := testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: "s3://" + s.bucket, Mountpoint: mp, Args: args, Env: s3Env(s.m),
	})
	s.mounts = append(s.mounts, d)
	return d
}

// TestLocalInPlaceRewriteNeverMixes runs testPartCachedOverwrite on a local directory
// whose file is rewritten in place at the same size with its mtime put back
// (rsync --inplace -t does that): size, mtime and inode all stay the same,
// and only the ctime shows the change.
func TestLocalInPlaceRewriteNeverMixes(t *testing.T) {
	testPartCachedOverwrite(t, localStore{dir: t.TempDir()})
}

// testPartCachedOverwrite caches only the last chunk of a four-chunk object,
// overwrites the object with other bytes of the same size, and reads it
// whole through the mount: every read must fail with EIO or return the old
// bytes (the mount's listing names the old version), or, at worst, the file
// must be new throughout; old and new bytes must never meet in one file. A
// remount with --refresh must then serve the new bytes entirely.
//
// The part read is the tail, not the head: a read at offset 0 starts a
// sequential stream whose readahead fetches the following chunks too, so
// the whole object would be cached before the overwrite and nothing could
// mix.
func testPartCachedOverwrite(t *testing.T, st objStore) {
	const (
		key   = "obj.bin"
		chunk = 1 << 20
		size  = 3*chunk + 300<<10
		tail  = 3 * chunk // the last chunk starts here
	)
	oldData := testenv.Bytes(300, 1, size)
	newData := testenv.Bytes(400, 1, size)
	st.put(t, key, oldData)

	cacheDir, mp := t.TempDir(), t.TempDir()
	d := st.mount(t, mp, cacheDir, "--chunk-size", "1M")
	file := filepath.Join(mp, key)
	held, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	buf := make([]byte, size-tail)
	if n, err := held.ReadAt(buf, tail); n != len(buf) || (err != nil && err != io.EOF) || !bytes.Equal(buf, oldData[tail:]) {
		t.Fatalf("last chunk before the overwrite: n=%d err=%v", n, err)
	}

	st.put(t, key, newData)

	for _, f := range []struct {
		label string
		open  func() (*os.File, error)
	}{
		{"descriptor opened before the overwrite", func() (*os.File, error) { return held, nil }},
		{"open after the overwrite", func() (*os.File, error) { return os.Open(file) }},
	} {
		fd, err := f.open()
		if err != nil {
			t.Errorf("%s: %v", f.label, err)
			continue
		}
		var old, nw, failed int
		p := make([]byte, 256<<10)
		for off := int64(0); off < size; off += int64(len(p)) {
			n, err := fd.ReadAt(p, off)
			want := min(len(p), size-int(off))
			switch {
			case err != nil && err != io.EOF:
				failed++
				if !errors.Is(err, syscall.EIO) {
					t.Errorf("%s: read at %d failed with %v, want EIO", f.label, off, err)
				}
			case n != want:
				t.Errorf("%s: short read at %d: %d bytes, want %d", f.label, off, n, want)
			case bytes.Equal(p[:n], oldData[off:off+int64(n)]):
				old++
			case bytes.Equal(p[:n], newData[off:off+int64(n)]):
				nw++
			default:
				t.Errorf("%s: read at %d returned bytes that are neither old nor new (%s)", f.label, off, mixDesc(p[:n], oldData[off:], newData[off:]))
			}
		}
		t.Logf("%s: %d reads old, %d new, %d failed", f.label, old, nw, failed)
		if old > 0 && nw > 0 {
			t.Errorf("%s: MIXED old (%d reads) and new (%d reads) bytes in one file", f.label, old, nw)
		}
		if fd != held {
			fd.Close()
		}
	}
	held.Close()
	d.Stop()

	d = st.mount(t, mp, cacheDir, "--chunk-size", "1M", "--refresh")
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read after remount with --refresh: %v", err)
	}
	if err := testenv.Diff(key+" (want the new content after --refresh)", got, newData); err != nil {
		t.Error(err)
	}
	d.NoErrorLogs()
	d.Stop()
}

// localStore is a local source directory; an overwrite rewrites the file in
// place and restores its mtime.
type localStore struct{ dir string }

func (s localStore) put(t *testing.T, key string, data []byte) {
	t.Helper()
	path := filepath.Join(s.dir, filepath.FromSlash(key))
	before, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, time.Time{}, before.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := func(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || ino(after) != ino(before) {
		t.Fatalf("the in-place rewrite of %s changed size, mtime or inode (%d %v %d, was %d %v %d): the test needs them kept",
			key, after.Size(), after.ModTime(), ino(after), before.Size(), before.ModTime(), ino(before))
	}
}

func (s localStore) mount(t *testing.T, mp, cacheDir string, extra ...string) *testenv.Mount {
	return testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: s.dir, Mountpoint: mp, Args: append([]string{"--cache-dir", cacheDir}, extra...),
	})
}
