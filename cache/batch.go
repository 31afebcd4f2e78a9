package cache

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// A Batch reads cached small objects from the cache disk many at a time:
// their reads go to the disk together in one system call (Linux AIO,
// O_DIRECT), and their completions come back through the Go runtime's
// poller (an eventfd), so that no thread blocks on the disk and the disk
// is told of a batch once. A read through ReadAt costs a blocking pread
// each: a thread parked on the disk, the runtime handing its P on, and a
// doorbell to the disk per object, which on a virtual machine costs more
// than the bytes. A Batch is for a caller that moves many cached objects
// at once: the file system's push of a declared order into the kernel's
// page cache.
//
// Only a packed object (one chunk, in a pack slot) wholly cached goes
// through a Batch; Add refuses anything else, and the caller reads it
// another way. Every read is checked as ReadAt's are: the chunk's CRC32C
// blocks against the bytes read, after the read, and the slot the read
// was issued against must still be the object's (an eviction or a drop
// since would have let the slot be reused). A chunk that fails its check
// is dropped, so the next read fetches it again.
//
// A Batch is used by one goroutine: Add, Wait, Release and Close are not
// safe for concurrent use.
type Batch struct {
	s     *Source
	depth int
	span  int64 // bytes a read may take, aligned
	aio   uint64
	ev    *os.File // eventfd, in the runtime's poller
	mem   []byte   // depth × span, page-aligned, outside the Go heap
	reads []batchRead
	free  []int
	// queued are the iocbs added since the last submit; cbs holds every
	// read's iocb, where the kernel reads it from at submit time.
	queued  []*iocb
	cbs     []iocb
	events  []ioEvent
	pending int // submitted, not yet completed
	// failed are reads io_submit refused, for the next Wait.
	failed []BatchDone
	closed bool
}

// batchRead is one read in flight (or done and not yet released).
type batchRead struct {
	o    *object
	sl   *store.Slot
	ch   chunk
	sums []uint32
	n    int
	tag  any
}

// BatchDone is a finished read of a Batch: Data holds the object's bytes,
// checked, until Release; Err is ErrNotCached where the object turned out
// not to be cached (dropped meanwhile, or failing its check), or the
// read's error.
type BatchDone struct {
	Tag  any
	Data []byte
	Err  error
	slot int
}

// The Linux AIO ABI (linux/aio_abi.h) for 64-bit little-endian machines.
type iocb struct {
	data     uint64
	key      uint32
	rwFlags  int32
	opcode   uint16
	prio     int16
	fd       uint32
	buf      uint64
	nbytes   uint64
	offset   int64
	reserved uint64
	flags    uint32
	resfd    uint32
}

type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

const (
	iocbCmdPread = 0
	iocbFlagRes  = 1 // IOCB_FLAG_RESFD: completions signal resfd
)

// ErrNoBatch is returned by NewBatch where the kernel or the cache dir
// offers no asynchronous O_DIRECT reads; callers read one at a time.
var ErrNoBatch = errors.New("cache: batched reads are not available")

// NewBatch returns a Batch of up to depth reads in flight, each of an
// object of at most maxSize bytes. Close it when done.
func (s *Source) NewBatch(depth int, maxSize int64) (*Batch, error) {
	if depth <= 0 || maxSize <= 0 || maxSize > s.c.chunkSize {
		return nil, fmt.Errorf("cache: batch of %d reads of %d bytes", depth, maxSize)
	}
	b := &Batch{s: s, depth: depth, span: store.AlignUp(maxSize)}
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, uintptr(depth), uintptr(unsafe.Pointer(&b.aio)), 0); e != 0 {
		return nil, fmt.Errorf("%w: io_setup: %v", ErrNoBatch, e)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		b.destroy()
		return nil, fmt.Errorf("%w: eventfd: %v", ErrNoBatch, err)
	}
	// Non-blocking, so os.NewFile puts it in the runtime's poller.
	b.ev = os.NewFile(uintptr(efd), "dsmount-batch")
	b.mem, err = unix.Mmap(-1, 0, depth*int(b.span), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.ev.Close()
		b.destroy()
		return nil, fmt.Errorf("cache: batch buffers: %w", err)
	}
	b.reads = make([]batchRead, depth)
	b.cbs = make([]iocb, depth)
	b.events = make([]ioEvent, depth)
	for i := depth - 1; i >= 0; i-- {
		b.free = append(b.free, i)
	}
	return b, nil
}

func (b *Batch) destroy() {
	if b.aio != 0 {
		// Waits for the reads in flight: their buffers are unmapped after.
		unix.Syscall(unix.SYS_IO_DESTROY, uintptr(b.aio), 0, 0)
		b.aio = 0
	}
}

// Room reports how many more reads Add may start.
func (b *Batch) Room() int { return len(b.free) }

// InFlight is how many reads were added and not yet returned by Wait.
func (b *Batch) InFlight() int { return b.pending + len(b.queued) + len(b.failed) }

// Add queues a read of obj, reported by Wait with tag. It returns false,
// adding nothing, where obj can't be read through the batch: not wholly
// cached, not packed, larger than the batch's reads, its pack without
// O_DIRECT, or no room (Room).
func (b *Batch) Add(obj backend.Object, tag any) (bool, error) {
	if b.closed || len(b.free) == 0 || obj.Size <= 0 || store.AlignUp(obj.Size) > b.span {
		return false, nil
	}
	c := b.s.c
	meta := metaOf(b.s.id, obj, c.chunkSize)
	if !meta.Packed() {
		return false, nil
	}
	o, err := c.existing(meta)
	if err != nil || o == nil {
		return false, err
	}
	o.mu.RLock()
	ch, sums, from, to := o.checkSpan(0, 0, obj.Size)
	sl := o.loc.Load()
	o.mu.RUnlock()
	if ch.state == chunkAbsent || sl == nil || from != 0 || to != obj.Size {
		return false, nil
	}
	f := sl.Pack.DirectFile()
	if f == nil {
		return false, nil
	}
	// The fd is read at submit time; should the pack be closed and its
	// number reused before then, the read is of another file, and the
	// slot check in Wait turns it away (a pack is closed only once every
	// slot of it is gone).
	var fd int = -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(u uintptr) { fd = int(u) })
	}
	if fd < 0 {
		return false, nil
	}
	i := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	b.reads[i] = batchRead{o: o, sl: sl, ch: ch, sums: sums, n: int(obj.Size), tag: tag}
	b.cbs[i] = iocb{
		data: uint64(i), opcode: iocbCmdPread, fd: uint32(fd),
		buf:    uint64(uintptr(unsafe.Pointer(&b.mem[int64(i)*b.span]))),
		nbytes: uint64(store.AlignUp(obj.Size)), offset: sl.Off,
		flags: iocbFlagRes, resfd: uint32(b.ev.Fd()),
	}
	b.queued = append(b.queued, &b.cbs[i])
	return true, nil
}

// submit sends the queued reads to the disk in one io_submit; a read it
// refuses goes to failed, for Wait to return.
func (b *Batch) submit() {
	for len(b.queued) > 0 {
		n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, uintptr(b.aio), uintptr(len(b.queued)), uintptr(unsafe.Pointer(&b.queued[0])))
		if e == unix.EINTR || e == unix.EAGAIN {
			continue
		}
		if e != 0 {
			// The first read refused: hand it back as failed, keep the rest.
			cb := b.queued[0]
			b.queued = b.queued[1:]
			b.failed = append(b.failed, BatchDone{Tag: b.reads[cb.data].tag, Err: fmt.Errorf("cache: io_submit: %w", e), slot: int(cb.data)})
			continue
		}
		b.pending += int(n)
		b.queued = b.queued[n:]
	}
}

// Wait submits the reads added since the last call and returns those
// finished, waiting (in the runtime's poller, with no thread blocked) for
// at least one if none is. It returns nothing when no read is in flight.
// Each returned read's slot is taken until Release.
func (b *Batch) Wait() ([]BatchDone, error) {
	if b.closed {
		return nil, ErrClosed
	}
	b.submit()
	out := b.failed
	b.failed = nil
	var cnt [8]byte
	for b.pending > 0 {
		n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, uintptr(b.aio), 0, uintptr(len(b.events)),
			uintptr(unsafe.Pointer(&b.events[0])), uintptr(unsafe.Pointer(&unix.Timespec{})), 0)
		if e == unix.EINTR {
			// Nothing reaped (n is -1): a signal came first.
			continue
		}
		if e != 0 {
			return out, fmt.Errorf("cache: io_getevents: %w", e)
		}
		for _, ev := range b.events[:n] {
			b.pending--
			out = append(out, b.finish(int(ev.data), ev.res))
		}
		if len(out) > 0 {
			return out, nil
		}
		// Nothing finished yet: sleep until the eventfd says so. Its count
		// may also cover completions reaped above; the loop reaps again.
		if _, err := b.ev.Read(cnt[:]); err != nil {
			return out, fmt.Errorf("cache: batch eventfd: %w", err)
		}
	}
	return out, nil
}

// finish checks read i, which the kernel finished with res (bytes read,
// or -errno).
func (b *Batch) finish(i int, res int64) BatchDone {
	r := &b.reads[i]
	d := BatchDone{Tag: r.tag, slot: i}
	c := b.s.c
	o := r.o
	o.mu.RLock()
	same := !o.dead && o.loc.Load() == r.sl && o.chunkAt(0) == r.ch
	var err error
	switch {
	case !same:
	case res < 0:
		err = fmt.Errorf("cache: batched read of a pack slot: %w", unix.Errno(-res))
	case res < int64(r.n):
		err = fmt.Errorf("cache: batched read of a pack slot: %d of %d bytes", res, r.n)
	}
	data := b.mem[int64(i)*b.span : int64(i)*b.span+int64(r.n)]
	ok := same && err == nil && record.SumsMatch(data, r.sums)
	o.mu.RUnlock()
	switch {
	case ok:
		d.Data = data
		c.stats.hit(r.n)
		b.s.stats.hit(r.n)
		c.touched(o)
		return d
	case !same:
		// Dropped or stored again since the read was issued: the slot
		// may hold anything by now.
	case err == nil:
		c.stats.verifyFailures.Add(1)
		c.warn.read.warn(c.log, "cache: cached chunk failed its checksum; refetching", "key", o.meta.Key, "chunk", 0)
		c.dropChunkIf(o, 0, r.ch.crc)
	default:
		c.stats.verifyFailures.Add(1)
		c.warn.read.warn(c.log, "cache: read of cached chunk failed; refetching", "key", o.meta.Key, "chunk", 0, "err", err)
		c.dropChunkIf(o, 0, r.ch.crc)
	}
	d.Err = ErrNotCached
	return d
}

// Abort gives up on every read added and not yet returned by Wait,
// waiting for those on the disk to end, and returns their tags; the
// batch is closed. For a caller whose Wait failed, which must still
// answer whoever waits on those reads. Reads Wait returned are the
// caller's: release them first.
func (b *Batch) Abort() []any {
	if b.closed {
		return nil
	}
	var tags []any
	for i := range b.reads {
		if b.reads[i].o != nil {
			tags = append(tags, b.reads[i].tag)
		}
	}
	b.queued, b.failed, b.pending = nil, nil, 0
	b.Close() // io_destroy waits for the reads on the disk
	return tags
}

// Release gives d's buffer back for another read; d.Data is not to be
// used after.
func (b *Batch) Release(d BatchDone) {
	b.reads[d.slot] = batchRead{}
	b.free = append(b.free, d.slot)
}

// Close waits for the reads in flight and frees the batch.
func (b *Batch) Close() {
	if b.closed {
		return
	}
	b.closed = true
	b.destroy()
	unix.Munmap(b.mem)
	b.ev.Close()
}

// ReadStaged copies the whole of obj, a one-chunk object, into p from the
// staging area, where a fetch ahead of its reader left it, and reports
// whether it was there. Reading it from the cache disk instead (a
// batched read) would go to the disk for bytes in memory.
func (s *Source) ReadStaged(obj backend.Object, p []byte) (int, bool) {
	c := s.c
	if obj.Size <= 0 || obj.Size > c.chunkSize || int64(len(p)) < obj.Size {
		return 0, false
	}
	o, err := c.existing(metaOf(s.id, obj, c.chunkSize))
	if err != nil || o == nil {
		return 0, false
	}
	n := int(obj.Size)
	if !c.fetch.staged.take(chunkID{o.id, 0}, p[:n], 0) {
		return 0, false
	}
	c.stats.hit(n)
	s.stats.hit(n)
	return n, true
}
