package cache

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Slot writes go through one writer goroutine that gathers whatever writes
// are queued and issues one vectored O_DIRECT write (pwritev) per run of
// contiguous slots: slots are allocated one after another, so concurrent
// stores fill runs. Each O_DIRECT write costs a system call, pinning its
// pages and a request to the device (a VM exit here, where the disk is
// virtio): one write per 110 KB slot cost 35–39 µs of CPU, one per eight
// slots 9 µs each (a microbenchmark of 10,000 slots).

const (
	maxWriteBatch = 64      // slots per pwritev, well under IOV_MAX
	maxWriteBytes = 8 << 20 // bytes per pwritev
	// writeLinger is how long the writer waits for more slots after the
	// first of a batch while other fetches are in flight (packStore.
	// inFlight): they will bring more. Nobody reading waits for a write
	// (readers take the bytes from the flight), and warm frees its fetch
	// slot before it, so a write may wait: a cold epoch or a warm stores a
	// small file every half millisecond or so, and gathering only what was
	// queued made batches of one or two (34 µs of CPU a slot in a warm).
	// A lone fetch's write goes at once.
	writeLinger = 2 * time.Millisecond
)

// packWrite is one slot write waiting for the writer.
type packWrite struct {
	sl   slot
	data []byte // the slot's bytes padded to its aligned length
	done chan error
}

// put stores data in a new slot and returns it once written. data must be
// from the cache's buffer pool (aligned, with room to the slot's aligned
// end), or any buffer on a filesystem without O_DIRECT; its padding is
// zeroed.
func (s *packStore) put(data []byte) (slot, error) {
	sl, err := s.alloc(int64(len(data)))
	if err != nil {
		return slot{}, err
	}
	n := alignUp(int64(len(data)))
	direct := sl.p.direct && int64(cap(data)) >= n && directLen(data[:n], sl.off) == int(n)
	if !direct {
		err = s.writeBuffered(sl, data)
	} else {
		full := data[:n]
		clear(full[len(data):])
		w := &packWrite{sl: sl, data: full, done: make(chan error, 1)}
		select {
		case s.writes <- w:
			err = <-w.done
		case <-s.quit:
			err = ErrClosed
		}
	}
	s.written(sl.p)
	if err != nil {
		s.free(sl, int64(len(data)))
		return slot{}, err
	}
	return sl, nil
}

// writeBuffered writes a slot through the page cache: the filesystem
// refuses O_DIRECT, or data is a buffer not fit for it.
func (s *packStore) writeBuffered(sl slot, data []byte) error {
	f, err := sl.p.file()
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, sl.off)
	return err
}

// runWriter is the writer goroutine (owned by the packStore, stopped by
// close).
func (s *packStore) runWriter() {
	defer s.wg.Done()
	var batch []*packWrite
	linger := time.NewTimer(writeLinger)
	linger.Stop()
	for {
		select {
		case w := <-s.writes:
			batch = append(batch[:0], w)
		case <-s.quit:
			return
		}
		bytes := len(batch[0].data)
		linger.Reset(writeLinger)
	gather:
		for len(batch) < maxWriteBatch && bytes < maxWriteBytes {
			if s.inFlight == nil || s.inFlight() <= int64(len(batch)) {
				// Nothing else coming soon: take only what is queued.
				select {
				case w := <-s.writes:
					batch = append(batch, w)
					bytes += len(w.data)
					continue
				default:
					break gather
				}
			}
			select {
			case w := <-s.writes:
				batch = append(batch, w)
				bytes += len(w.data)
			case <-linger.C:
				break gather
			case <-s.quit:
				// Close comes after every store has returned: nothing
				// is queued behind this batch.
				break gather
			}
		}
		linger.Stop()
		s.writeBatch(batch)
	}
}

// writeBatch writes a batch as runs of contiguous slots of one pack, one
// pwritev each, and tells every caller how its slot fared.
func (s *packStore) writeBatch(batch []*packWrite) {
	slices.SortFunc(batch, func(a, b *packWrite) int {
		if a.sl.p != b.sl.p {
			return cmp.Compare(a.sl.p.id, b.sl.p.id)
		}
		return cmp.Compare(a.sl.off, b.sl.off)
	})
	iov := make([][]byte, 0, len(batch))
	for start := 0; start < len(batch); {
		end := start + 1
		next := batch[start].sl.off + int64(len(batch[start].data))
		for end < len(batch) && batch[end].sl.p == batch[start].sl.p && batch[end].sl.off == next {
			next += int64(len(batch[end].data))
			end++
		}
		run := batch[start:end]
		iov = iov[:0]
		var want int
		for _, w := range run {
			iov = append(iov, w.data)
			want += len(w.data)
		}
		// Writers hold a count on the pack (writing), so its write fd
		// stays open until they are answered.
		p := run[0].sl.p
		var n int
		err := withFd(p.wf, func(fd int) (err error) {
			n, err = unix.Pwritev(fd, iov, run[0].sl.off)
			return err
		})
		switch {
		case err != nil:
			err = fmt.Errorf("write pack %s: %w", p.path, err)
		case n != want:
			err = fmt.Errorf("write pack %s: %d of %d bytes written", p.path, n, want)
		}
		for _, w := range run {
			w.done <- err
		}
		start = end
	}
}
