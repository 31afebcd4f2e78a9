package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestMinIOMetricsExact checks that GetObjectCount moves by exactly one per
// GetObject, immediately (no caching delay), for whole and ranged GETs of
// small and large objects, sequential and parallel, and that HEAD, LIST and
// PUT do not move it.
func TestMinIOMetricsExact(t *testing.T) {
	m := StartMinIO(t)
	ctx := context.Background()
	c := m.Client()
	m.CreateBucket("metrics")
	m.CreateBucket("other")
	objs := map[string][]byte{
		"small":  Bytes(1, 1, 1000),
		"medium": Bytes(1, 2, 200<<10),
		"large":  Bytes(1, 3, 8<<20),
	}
	for k, v := range objs {
		m.PutObject("metrics", k, v)
	}
	m.PutObject("other", "x", Bytes(1, 4, 5000))

	n0, b0 := m.GetObjectCount()
	if n0 != 0 {
		t.Fatalf("fresh server: GetObjectCount = %d, want 0", n0)
	}
	// HEAD, LIST, PUT must not count as GETs.
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("metrics"), Key: aws.String("large")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("metrics")}); err != nil {
		t.Fatal(err)
	}
	m.PutObject("metrics", "put-after", []byte("x"))
	if n, _ := m.GetObjectCount(); n != 0 {
		t.Fatalf("after HEAD/LIST/PUT: GetObjectCount = %d, want 0", n)
	}

	get := func(bucket, key, rng string) []byte {
		in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			t.Fatalf("GetObject %s/%s %s: %v", bucket, key, rng, err)
		}
		defer out.Body.Close()
		data, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	// Sequential: scrape right after each GET completes; must be exact every time.
	want := int64(0)
	keys := []string{"small", "medium", "large"}
	var gotBytes int64
	for i := 0; i < 150; i++ {
		k := keys[i%3]
		rng := ""
		if i%2 == 1 {
			rng = fmt.Sprintf("bytes=%d-%d", i, i+4095)
		}
		data := get("metrics", k, rng)
		gotBytes += int64(len(data))
		want++
		if n, _ := m.GetObjectCount(); n != want {
			t.Fatalf("after GET #%d (%s %s): GetObjectCount = %d, want %d", i+1, k, rng, n, want)
		}
	}
	// Another bucket counts too.
	get("other", "x", "")
	want++
	if n, _ := m.GetObjectCount(); n != want {
		t.Fatalf("after GET in a 2nd bucket: GetObjectCount = %d, want %d", n, want)
	}

	// Parallel: 64 GETs at once (whole large objects), then one scrape.
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("metrics"), Key: aws.String("large")})
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, out.Body)
			out.Body.Close()
		}()
	}
	wg.Wait()
	want += 64
	n, b1 := m.GetObjectCount()
	if n != want {
		t.Fatalf("after 64 parallel GETs: GetObjectCount = %d, want %d", n, want)
	}
	if min := gotBytes + 64*int64(len(objs["large"])); b1-b0 < min {
		t.Fatalf("bytes sent grew by %d, want at least the %d body bytes read", b1-b0, min)
	}

	// An abandoned GET (client reads a little and hangs up) still counts once.
	cctx, cancel := context.WithCancel(ctx)
	out, err := c.GetObject(cctx, &s3.GetObjectInput{Bucket: aws.String("metrics"), Key: aws.String("large")})
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(io.Discard, out.Body, 1000)
	want++
	if n, _ := m.GetObjectCount(); n != want {
		t.Fatalf("with a GET in flight: GetObjectCount = %d, want %d", n, want)
	}
	cancel()
	out.Body.Close()

	// The node-wide series (updated on completion) catch up with the
	// per-bucket in-flight+total count. Polled with a deadline: we are
	// waiting for MinIO's handler to notice the hang-up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.APIStats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Requests["getobject"] == want && st.InFlight["getobject"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-wide getobject total %d (in flight %d), want %d", st.Requests["getobject"], st.InFlight["getobject"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, _ := m.GetObjectCount(); n != want {
		t.Fatalf("at the end: GetObjectCount = %d, want %d", n, want)
	}
}

func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%d:%x", len(data), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerateDataset(t *testing.T) {
	spec := DatasetSpec{Seed: 7, SmallFiles: 1000, FilesPerDir: 200, LargeFiles: []int64{3<<20 + 17}, OddNames: true}
	a, b := t.TempDir(), t.TempDir()
	pa := GenerateDataset(t, a, spec)
	pb := GenerateDataset(t, b, spec)
	if !equalStrings(pa, pb) {
		t.Fatal("same spec gave different path lists")
	}
	if !sort.StringsAreSorted(pa) {
		t.Fatal("paths not sorted")
	}
	if want := 1000 + 1 + len(OddNames); len(pa) != want {
		t.Fatalf("%d paths, want %d", len(pa), want)
	}
	if !equalStrings(pa, DatasetPaths(spec)) {
		t.Fatal("DatasetPaths disagrees with GenerateDataset")
	}
	ha, hb := hashTree(t, a), hashTree(t, b)
	if len(ha) != len(pa) {
		t.Fatalf("tree has %d files, GenerateDataset returned %d paths", len(ha), len(pa))
	}
	var total int64
	for _, p := range pa {
		if ha[p] == "" || ha[p] != hb[p] {
			t.Fatalf("%s: differs between two generations (%q vs %q)", p, ha[p], hb[p])
		}
		st, err := os.Stat(filepath.Join(a, p))
		if err != nil {
			t.Fatal(err)
		}
		total += st.Size()
		if strings.HasPrefix(p, "leaf") || strings.HasPrefix(p, "d0-") {
			if st.Size() < 1<<10 || st.Size() > 200<<10 {
				t.Errorf("%s: size %d outside [1KiB, 200KiB]", p, st.Size())
			}
			if depth := strings.Count(p, "/"); depth < 1 || depth > 3 {
				t.Errorf("%s: directory depth %d, want 1..3", p, depth)
			}
		}
	}
	if total != DatasetSize(spec) {
		t.Fatalf("DatasetSize = %d, files total %d", DatasetSize(spec), total)
	}
	for _, o := range OddNames {
		st, err := os.Stat(filepath.Join(a, o.Path))
		if err != nil || st.Size() != int64(o.Size) {
			t.Fatalf("odd file %q: %v, size %v, want %d", o.Path, err, st, o.Size)
		}
	}
	if st, _ := os.Stat(filepath.Join(a, "large/large-0.bin")); st == nil || st.Size() != 3<<20+17 {
		t.Fatalf("large file: %v", st)
	}
	// Several directories, each holding at most FilesPerDir files.
	perDir := map[string]int{}
	for _, p := range pa {
		perDir[filepath.Dir(p)]++
	}
	if len(perDir) < 5 {
		t.Fatalf("only %d directories", len(perDir))
	}
	// A different seed gives different bytes.
	spec2 := spec
	spec2.Seed = 8
	c := t.TempDir()
	GenerateDataset(t, c, spec2)
	hc := hashTree(t, c)
	if hc["large/large-0.bin"] == ha["large/large-0.bin"] {
		t.Fatal("different seeds gave the same large file")
	}
	// Files differ from each other (no stream reuse).
	if ha["with space.txt"][5:] == ha["-leading-dash.txt"][3:] {
		t.Fatal("suspicious")
	}
	// ContentGen is position-consistent however it is chunked.
	whole := Bytes(3, 4, 1000)
	g := NewContentGen(3, 4)
	var parts []byte
	for _, n := range []int{1, 7, 8, 9, 3, 100, 872} {
		p := make([]byte, n)
		g.Fill(p)
		parts = append(parts, p...)
	}
	if !bytes.Equal(whole, parts) {
		t.Fatal("ContentGen output depends on how it is chunked")
	}
}

func TestGenerateLargeIsFast(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	GenerateDataset(t, dir, DatasetSpec{Seed: 1, LargeFiles: []int64{150 << 20, 100 << 20}})
	d := time.Since(start)
	t.Logf("250 MiB generated in %v", d)
	if d > 20*time.Second {
		t.Fatalf("generating 250 MiB took %v", d)
	}
}

func TestUploadDirAndCompare(t *testing.T) {
	m := StartMinIO(t)
	src := t.TempDir()
	paths := GenerateDataset(t, src, DatasetSpec{Seed: 3, SmallFiles: 300, FilesPerDir: 50, LargeFiles: []int64{5 << 20}, OddNames: true})
	m.CreateBucket("upload")
	m.UploadDir("upload", "some/prefix/", src)

	ctx := context.Background()
	got := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(m.Client(), &s3.ListObjectsV2Input{Bucket: aws.String("upload")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			got[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	if len(got) != len(paths) {
		t.Fatalf("bucket has %d objects, dataset %d files", len(got), len(paths))
	}
	for _, rel := range paths {
		st, _ := os.Stat(filepath.Join(src, rel))
		if sz, ok := got["some/prefix/"+rel]; !ok || sz != st.Size() {
			t.Fatalf("object some/prefix/%s: present %v size %d, want size %d", rel, ok, sz, st.Size())
		}
	}
	// Read back the odd names and the large file and compare.
	for _, rel := range []string{"ünïcødé 文件.bin", "with space.txt", "empty.bin", "large/large-0.bin", paths[0]} {
		out, err := m.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("upload"), Key: aws.String("some/prefix/" + rel)})
		if err != nil {
			t.Fatalf("get %s: %v", rel, err)
		}
		data, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := CompareFile(src, rel, data); err != nil {
			t.Fatal(err)
		}
	}
	// CompareFile reports the first differing offset.
	data, _ := os.ReadFile(filepath.Join(src, "with space.txt"))
	data[700] ^= 1
	err := CompareFile(src, "with space.txt", data)
	if me, ok := err.(*MismatchError); !ok || me.Offset != 700 {
		t.Fatalf("CompareFile on a corrupted copy: %v", err)
	}
	if err := CompareFile(src, "with space.txt", data[:10]); err == nil {
		t.Fatal("CompareFile accepted a short read")
	}
}

func TestReadAllShuffled(t *testing.T) {
	src := t.TempDir()
	paths := GenerateDataset(t, src, DatasetSpec{Seed: 5, SmallFiles: 200, FilesPerDir: 40, OddNames: true})
	var mu sync.Mutex
	seen := map[string]int{}
	var order1, order2 []string
	for i, order := range []*[]string{&order1, &order2} {
		err := ReadAllShuffled(src, paths, 1, int64(i), func(p string, data []byte) error {
			mu.Lock()
			seen[p]++
			*order = append(*order, p)
			mu.Unlock()
			return CompareFile(src, p, data)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range paths {
		if seen[p] != 2 {
			t.Fatalf("%s read %d times, want 2", p, seen[p])
		}
	}
	if equalStrings(order1, order2) || equalStrings(order1, paths) {
		t.Fatal("order not shuffled by seed")
	}
	res := CompareTree(t, src, src, paths, 8, 1)
	if res.Files != len(paths) {
		t.Fatal(res)
	}
	// Errors stop the pass and are returned.
	n := 0
	err := ReadAllShuffled(src, append([]string{"does/not/exist"}, paths...), 1, 0, func(string, []byte) error { n++; return nil })
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("missing file: err = %v", err)
	}
	if err := CompareListings(src, src); err != nil {
		t.Fatal(err)
	}
	// The pread/mmap helpers agree with a plain directory, and catch a
	// corrupted copy.
	big := t.TempDir()
	GenerateDataset(t, big, DatasetSpec{Seed: 9, LargeFiles: []int64{5<<20 + 3}})
	if err := RandomReads(big, big, "large/large-0.bin", 500, 1<<20, 1); err != nil {
		t.Fatal(err)
	}
	if err := ReadSameFileParallel(big, big, "large/large-0.bin", 4, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := MmapCompare(big, big, "large/large-0.bin"); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	GenerateDataset(t, bad, DatasetSpec{Seed: 9, LargeFiles: []int64{5<<20 + 3}})
	fh, _ := os.OpenFile(filepath.Join(bad, "large/large-0.bin"), os.O_WRONLY, 0)
	fh.WriteAt([]byte{0}, 3<<20+5)
	fh.WriteAt([]byte{1}, 3<<20+6)
	fh.Close()
	if err := RandomReads(big, bad, "large/large-0.bin", 2000, 1<<20, 1); err == nil {
		t.Fatal("RandomReads missed a corrupted byte")
	}
	if err := ReadSameFileParallel(big, bad, "large/large-0.bin", 4, 1<<20); err == nil || !strings.Contains(err.Error(), "3145733") && !strings.Contains(err.Error(), "3145734") {
		t.Fatalf("ReadSameFileParallel on a corrupted copy: %v", err)
	}
	if err := MmapCompare(big, bad, "large/large-0.bin"); err == nil {
		t.Fatal("MmapCompare missed a corrupted byte")
	}
	other := t.TempDir()
	GenerateDataset(t, other, DatasetSpec{Seed: 5, SmallFiles: 199, FilesPerDir: 40, OddNames: true})
	if err := CompareListings(src, other); err == nil {
		t.Fatal("CompareListings missed a missing file")
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A fake daemon (a shell script that mounts a tmpfs) exercises the Mount
// helper: ready detection, Stop's exit-status and unmount checks, Kill's lazy
// detach, and the failure path.
const fakeDaemon = `#!/bin/bash
mp="$3"
case "$FAKE_MODE" in
fail) echo "dsmount: boom: bad things" >&2; exit 2 ;;
badexit) trap 'umount "$mp"; exit 3' TERM ;;
*) trap 'umount "$mp"; exit 0' TERM ;;
esac
echo '{"level":"INFO","msg":"starting"}' >&2
mount -t tmpfs fake "$mp" || exit 9
echo '{"level":"INFO","msg":"mounted","mountpoint":"x"}' >&2
while :; do sleep 0.05 >/dev/null 2>&1; done
`

func TestMountHelperWithFakeDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs and must run as root (as the whole suite does)")
	}
	bin := filepath.Join(t.TempDir(), "fake-dsmount")
	if err := os.WriteFile(bin, []byte(fakeDaemon), 0o755); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(t.TempDir(), "mnt with space")
	os.Mkdir(mp, 0o755)

	m := StartMount(t, MountConfig{Bin: bin, Source: "/nowhere", Mountpoint: mp})
	if ok, _ := IsMounted(mp); !ok {
		t.Fatal("not mounted after StartMount")
	}
	m.Stop()
	if ok, _ := IsMounted(mp); ok {
		t.Fatal("still mounted after Stop")
	}

	m = StartMount(t, MountConfig{Bin: bin, Source: "/nowhere", Mountpoint: mp})
	m.Kill()
	if ok, _ := IsMounted(mp); ok {
		t.Fatal("still mounted after Kill")
	}

	m = StartMount(t, MountConfig{Bin: bin, Source: "/nowhere", Mountpoint: mp, Env: append(os.Environ(), "FAKE_MODE=badexit")})
	if err := m.StopErr(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Stop of a daemon exiting 3: %v", err)
	}
	if ok, _ := IsMounted(mp); ok {
		t.Fatal("still mounted after a failed Stop")
	}

	_, err := TryStartMount(t, MountConfig{Bin: bin, Source: "/nowhere", Mountpoint: mp, Env: append(os.Environ(), "FAKE_MODE=fail")})
	if err == nil || !strings.Contains(err.Error(), "dsmount: boom: bad things") {
		t.Fatalf("TryStartMount of a failing daemon: %v", err)
	}

	r := RunCLI(bin, append(os.Environ(), "FAKE_MODE=fail"), 10*time.Second, "mount", "a", mp)
	if r.ExitCode != 2 || strings.TrimSpace(r.Stderr) != "dsmount: boom: bad things" {
		t.Fatalf("RunCLI: %+v", r)
	}
}

// TestFakeS3 checks the fake against the real SDK client, including keys
// MinIO refuses.
func TestFakeS3(t *testing.T) {
	f := StartFakeS3(t, "fakebucket")
	c := NewS3Client(f.Endpoint(), "k", "s")
	ctx := context.Background()
	objs := map[string][]byte{
		"a//b": []byte("double"), "./x": []byte("dot"), "../y": []byte("dotdot"),
		"dir/": nil, "p": []byte("p"), "p/q": []byte("pq"), "sp ace/ü文": Bytes(1, 1, 5000),
		"long/" + strings.Repeat("n", 300): []byte("long"), "new\nline": []byte("nl"),
	}
	for k, v := range objs {
		f.Put(k, v)
	}
	var listed []string
	pg := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("fakebucket"), MaxKeys: aws.Int32(2)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			listed = append(listed, k)
			if aws.ToInt64(o.Size) != int64(len(objs[k])) {
				t.Errorf("%q: listed size %d", k, aws.ToInt64(o.Size))
			}
		}
	}
	if len(listed) != len(objs) {
		t.Fatalf("listed %q", listed)
	}
	pg = s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("fakebucket"), Prefix: aws.String("p/")})
	page, err := pg.NextPage(ctx)
	if err != nil || len(page.Contents) != 1 || aws.ToString(page.Contents[0].Key) != "p/q" {
		t.Fatalf("prefix list: %v %v", page, err)
	}
	for k, v := range objs {
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("fakebucket"), Key: aws.String(k)})
		if err != nil || aws.ToInt64(h.ContentLength) != int64(len(v)) {
			t.Fatalf("HEAD %q: %v", k, err)
		}
		if len(v) == 0 {
			continue
		}
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("fakebucket"), Key: aws.String(k),
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", len(v)/2, len(v)+10)), IfMatch: h.ETag})
		if err != nil {
			t.Fatalf("GET %q: %v", k, err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, v[len(v)/2:]) {
			t.Fatalf("GET %q second half: %q", k, got)
		}
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("fakebucket"), Key: aws.String("p"), IfMatch: aws.String(`"nope"`)})
	if err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("If-Match mismatch: %v", err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("fakebucket"), Key: aws.String("p"), Range: aws.String("bytes=5-9")})
	if err == nil || !strings.Contains(err.Error(), "416") {
		t.Fatalf("range past the end: %v", err)
	}
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("otherbucket")})
	if err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("other bucket: %v", err)
	}
	if f.GetCount() == 0 {
		t.Fatal("GetCount")
	}
}
