package jobs

import (
	"container/heap"
	"math"
	"sort"
)

// oracle replays reads (all jobs' reads of all epochs, epochStart[e] the
// index of epoch e's first) in the order they started, on a cache of
// capacity bytes that knows the future: on a miss it admits the item only
// if it is needed again, evicting what is needed farthest in the future,
// and not if everything cached is needed sooner (Belady's rule, with
// sizes). It returns each epoch's hit rate.
func oracle(reads []read, epochStart []int, sizes []int64, capacity int64) []float64 {
	type access struct {
		item, epoch int
		start       int64
	}
	acc := make([]access, len(reads))
	for e, from := range epochStart {
		to := len(reads)
		if e+1 < len(epochStart) {
			to = epochStart[e+1]
		}
		for i := from; i < to; i++ {
			acc[i] = access{reads[i].item, e, reads[i].start}
		}
	}
	sort.SliceStable(acc, func(a, b int) bool { return acc[a].start < acc[b].start })
	next := make([]int, len(acc))
	last := map[int]int{}
	for i := len(acc) - 1; i >= 0; i-- {
		next[i] = math.MaxInt
		if j, ok := last[acc[i].item]; ok {
			next[i] = j
		}
		last[acc[i].item] = i
	}
	h := &farthest{}
	nextUse := map[int]int{} // cached item -> its next use
	var used int64
	hits := make([]int, len(epochStart))
	counts := make([]int, len(epochStart))
	for i, a := range acc {
		counts[a.epoch]++
		if _, ok := nextUse[a.item]; ok {
			hits[a.epoch]++
			nextUse[a.item] = next[i]
			heap.Push(h, use{a.item, next[i]})
			continue
		}
		if next[i] == math.MaxInt {
			continue // never needed again: not kept
		}
		size := sizes[a.item]
		admit := true
		for used+size > capacity {
			top, ok := h.peekLive(nextUse)
			if !ok || top.next <= next[i] {
				admit = false
				break
			}
			heap.Pop(h)
			delete(nextUse, top.item)
			used -= sizes[top.item]
		}
		if admit {
			nextUse[a.item] = next[i]
			heap.Push(h, use{a.item, next[i]})
			used += size
		}
	}
	out := make([]float64, len(epochStart))
	for e := range out {
		if counts[e] > 0 {
			out[e] = float64(hits[e]) / float64(counts[e])
		}
	}
	return out
}

type use struct{ item, next int }

// farthest is a max-heap of cached items by next use; entries whose item
// was evicted or has since been used again are stale and skipped.
type farthest []use

func (h farthest) Len() int           { return len(h) }
func (h farthest) Less(a, b int) bool { return h[a].next > h[b].next }
func (h farthest) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *farthest) Push(x any)        { *h = append(*h, x.(use)) }
func (h *farthest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// peekLive drops stale entries from the top and returns the live top.
func (h *farthest) peekLive(nextUse map[int]int) (use, bool) {
	for h.Len() > 0 {
		top := (*h)[0]
		if n, ok := nextUse[top.item]; ok && n == top.next {
			return top, true
		}
		heap.Pop(h)
	}
	return use{}, false
}
