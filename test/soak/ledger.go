package main

import (
	"sync"
	"time"
)

// maxEvents bounds the events kept (a kill mid-epoch makes every read
// still to come fail at once: thousands of read errors); the counts go on.
const maxEvents = 200_000

// ledger gathers what the readers and the soak's own operations saw: the
// bytes verified, and every read error, wrong read, slow read and failed
// operation (declaration, warm, mount) with its time.
type ledger struct {
	mu       sync.Mutex
	running  map[*readerProc]bool
	last     map[*readerProc][2]int64 // files, bytes of its last progress
	files    int64                    // verified reads
	bytes    int64                    // verified bytes
	events   []event
	counts   map[string]int64 // events by kind, dropped ones too
	nStarted int64            // reader processes started
	nExited  int64            // reader processes that exited
}

func newLedger() *ledger {
	return &ledger{running: map[*readerProc]bool{}, last: map[*readerProc][2]int64{}, counts: map[string]int64{}}
}

func (l *ledger) started(p *readerProc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[p] = true
	l.nStarted++
}

func (l *ledger) exited(p *readerProc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.running, p)
	delete(l.last, p)
	l.nExited++
}

// progress takes a process's running totals.
func (l *ledger) progress(p *readerProc, files, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.last[p]
	l.files += files - prev[0]
	l.bytes += bytes - prev[1]
	l.last[p] = [2]int64{files, bytes}
}

// record keeps one event.
func (l *ledger) record(ev event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[ev.E]++
	if len(l.events) < maxEvents {
		l.events = append(l.events, ev)
	}
}

// opError records a failed operation of the soak itself (warm, mount,
// unmount) that ran from start to now.
func (l *ledger) opError(op string, start time.Time, err error) {
	l.record(event{E: "op-error", Job: op, Start: start.UnixNano(), End: time.Now().UnixNano(), Err: err.Error()})
}

// alive lists the reader processes still running.
func (l *ledger) alive() []*readerProc {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*readerProc, 0, len(l.running))
	for p := range l.running {
		out = append(out, p)
	}
	return out
}

// totals are the ledger's counts at one moment.
type totals struct {
	Files    int64            `json:"verified_reads"`
	Bytes    int64            `json:"verified_bytes"`
	Events   map[string]int64 `json:"events"`
	Started  int64            `json:"reader_processes"`
	Finished int64            `json:"reader_processes_exited"`
}

func (l *ledger) totals() totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := make(map[string]int64, len(l.counts))
	for k, v := range l.counts {
		ev[k] = v
	}
	return totals{Files: l.files, Bytes: l.bytes, Events: ev, Started: l.nStarted, Finished: l.nExited}
}

// snapshot copies the events kept.
func (l *ledger) snapshot() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.events...)
}
