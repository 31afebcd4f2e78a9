package ranges

import (
	"fmt"
	"math/rand/v2"
)

// rawGets is the reference: --readers goroutines of this program, each
// asking the store, through the proxy, for one window at a time (a
// GetObject with a Range of the window's bytes at a random token) and
// checking every token, for seconds. stream picks the goroutines' random
// streams (the warm-up's differ from the pass's). CPU is this program's.
func rawGets(e *env, seconds float64, stream uint64) row {
	return rawGetsN(e, seconds, stream, e.cfg.readers)
}

// rawGetsN is rawGets with inflight goroutines.
func rawGetsN(e *env, seconds float64, stream uint64, inflight int) row {
	c := e.cfg
	toks := c.block + 1
	win := window(c)
	r := rangedGets(e, seconds, prefix+"/"+fileRel, win, inflight, func(g int) func() span {
		rng := rand.New(rand.NewPCG(uint64(c.rngSeed), stream+uint64(g)))
		return func() span {
			i := rng.Uint64N(e.tokens - uint64(c.block))
			return span{off: int64(2 * i), n: int64(win), what: fmt.Sprintf("window at token %d", i),
				check: func(b []byte) error { return checkWindow(c.seed, i, b, toks) }}
		}
	})
	r.fill(e)
	return r
}
