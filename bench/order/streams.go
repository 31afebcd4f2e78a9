package order

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// The streams passes (--streams N) read N large files at once, one dd each,
// like loader workers that each stream their own shard. Each stream keeps
// its own window of chunks fetched ahead, and every chunk fetched ahead
// waits for its reader in the cache's one staging area: what the streams
// hold ahead together decides whether their chunks wait there or are
// pushed out to be read back from disk.

// streamFile is one of the streams passes' files.
type streamFile struct {
	rel  string // under the source dir and the "streams" prefix
	size int64
	crc  uint32
}

// streamsRound is one round of the streams passes.
type streamsRound struct {
	storePar, dd result
}

// setupStreams generates and uploads --streams files of --stream-mib each
// under the "streams" prefix. They are served through the large file's
// proxy, shaped the same.
func setupStreams(e *env) {
	c, t := e.cfg, e.T
	src := filepath.Join(e.Work, "src-streams")
	sizes := make([]int64, c.streams)
	for i := range sizes {
		sizes[i] = c.streamMiB << 20
	}
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 13, LargeFiles: sizes})
	for _, p := range paths {
		n, crc, err := testenv.CRCFile(filepath.Join(src, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("checksum: %v", err)
		}
		e.streamFiles = append(e.streamFiles, streamFile{rel: p, size: n, crc: crc})
	}
	t0 := time.Now()
	e.Store.Upload(t, bucket, "streams", src, 4)
	cli.Logf("streams: %d files of %d MiB, uploaded in %v", c.streams, c.streamMiB, cli.Since(t0))
}

func runStreamsRound(e *env, r int) streamsRound {
	var sr streamsRound
	e.recycleMemory()
	sr.storePar = streamsStorePar(e, 16)
	cli.Logf("round %d: streams: the store's own 16 ranged GETs over the %d files: %.1f MB/s", r, len(e.streamFiles), sr.storePar.MBPerSec())
	e.recycleMemory()
	sr.dd = streamsDD(e, r)
	cli.Logf("round %d: streams: %d dd at once through a cold mount: %.1f MB/s in all, %d GETs", r, len(e.streamFiles), sr.dd.MBPerSec(), sr.dd.GETs)
	return sr
}

// streamsStorePar reads every streams file as 4 MiB ranged GETs, par in
// flight, no filesystem: what the store gives the streams together.
func streamsStorePar(e *env, par int) result {
	var gets []rangeGet
	for _, f := range e.streamFiles {
		gets = append(gets, pieces("streams/"+f.rel, f.size)...)
	}
	r, err := rangedGets(e, gets, par)
	if err != nil {
		e.T.Fatalf("parallel ranged GETs of the streams files: %v", err)
	}
	r.name, r.Files = "streams: store, 16 GETs", int64(len(e.streamFiles))
	r.note = fmt.Sprintf("%d ranged GetObject of 4 MiB in flight over the %d files, no filesystem: the reference; proc cpu: this program", par, len(e.streamFiles))
	return r
}

// streamsDD runs one dd per streams file, all at once, on a fresh mount and
// cache dir, then checks every file's bytes through the mount (untimed).
func streamsDD(e *env, round int) result {
	t := e.T
	dir := filepath.Join(e.Work, fmt.Sprintf("round%d-streams", round))
	m, metricsURL := e.startMount(dir, "s3://"+bucket+"/streams", e.largeEndpoint)
	mp := m.Dir()

	meter := measure.Start(e.Store, measure.Proc(m.Pid()))
	smp := startSampler(metricsURL, e.cfg.sampleEvery)
	var wg sync.WaitGroup
	got := make([]int64, len(e.streamFiles))
	errs := make([]error, len(e.streamFiles))
	start := time.Now()
	for i, f := range e.streamFiles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, _, errs[i] = testenv.DD(filepath.Join(mp, filepath.FromSlash(f.rel)))
		}()
	}
	wg.Wait()
	el := time.Since(start)
	usage := meter.Stop()
	inFlight := smp.finish()
	var total int64
	for i, f := range e.streamFiles {
		if errs[i] != nil {
			t.Fatalf("dd through the mount: %v", errs[i])
		}
		if got[i] != f.size {
			t.Fatalf("dd of %s through the mount copied %d bytes; the file has %d", f.rel, got[i], f.size)
		}
		total += got[i]
	}
	st, err := testenv.StatsErr(e.Bin, mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, f := range e.streamFiles {
		e.checkThroughMount(mp, f.rel, f.crc)
	}
	logs := e.stopMount(m, dir)
	return result{name: fmt.Sprintf("streams: %d dd at once", len(e.streamFiles)), Pass: measure.Pass{Files: int64(len(e.streamFiles)), Bytes: total, Elapsed: el},
		Usage: usage, stall: -1, logs: logs,
		note: fmt.Sprintf("one dd bs=1M per file, all at once, fresh mount+cache; %d chunks fetched, %d pushed out of staging unread; bytes checked after (CRC-32C); %s",
			st.Cache.ChunksFetched, st.Cache.StagedPushedOut, inFlight)}
}
