package flight

import (
	"sync"
	"testing"
	"time"
)

// TestGroupJoinsOneFlight: callers of one key while its flight runs share
// it (run once, joined once each, under the lock that orders them with
// left); a foreground joiner raises a background flight once; left hears
// of the flight once its run returned, and a later Join starts anew.
func TestGroupJoinsOneFlight(t *testing.T) {
	type state struct{ joined, runs int }
	var mu sync.Mutex
	var leftWith []int
	g := NewGroup(NewWorkers(time.Hour), func(string) *state { return &state{} }, func(_ string, s *state) {
		mu.Lock()
		leftWith = append(leftWith, s.joined)
		mu.Unlock()
	})
	defer g.Close()
	release := make(chan struct{})
	run := func(f *Flight[*state]) {
		f.Val.runs++
		<-release
		f.Publish(nil)
	}
	joined := func(s *state) { s.joined++ }
	f1, raised := g.Join("k", false, joined, run)
	if raised || f1.Foreground() {
		t.Fatal("a background flight started raised")
	}
	f2, raised := g.Join("k", true, joined, run)
	if f2 != f1 || !raised || !f1.Foreground() {
		t.Fatalf("second caller: same flight %v, raised %v", f2 == f1, raised)
	}
	if _, raised := g.Join("k", true, joined, run); raised {
		t.Fatal("raised twice")
	}
	if g.Running("k") != f1 || g.Any() != f1 {
		t.Fatal("the running flight is not found")
	}
	close(release)
	<-f1.Done()
	if f1.Err() != nil || f1.Val.runs != 1 || f1.Val.joined != 3 {
		t.Fatalf("err %v, runs %d, joined %d; want nil, 1, 3", f1.Err(), f1.Val.runs, f1.Val.joined)
	}
	mu.Lock()
	if len(leftWith) != 1 || leftWith[0] != 3 {
		t.Fatalf("left heard %v; want once, after the 3 joins", leftWith)
	}
	mu.Unlock()
	if g.Any() != nil {
		t.Fatal("a flight stays after it left")
	}
	f3, _ := g.Join("k", false, nil, func(f *Flight[*state]) {})
	<-f3.Done()
	if f3 == f1 || f3.Err() != ErrUnset {
		t.Fatalf("a run that published nothing: err %v", f3.Err())
	}
}
