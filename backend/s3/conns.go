package s3

import (
	"context"
	"net"
	"sync"
)

// connSet records every connection the backend's HTTP clients dial, so Close
// can release them: the SDK builds its transports internally and offers no
// other way to reach their pools.
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func newConnSet() *connSet { return &connSet{conns: map[*trackedConn]struct{}{}} }

func (s *connSet) track(dial dialFunc) dialFunc {
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, set: s}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			c.Close()
			return nil, errClosed{}
		}
		s.conns[tc] = struct{}{}
		return tc, nil
	}
}

func (s *connSet) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// errClosed is what requests get after Close. It tells the SDK's retryer not
// to retry, which it otherwise would for a failed dial, with backoff.
type errClosed struct{}

func (errClosed) Error() string        { return "backend is closed" }
func (errClosed) Unwrap() error        { return net.ErrClosed }
func (errClosed) RetryableError() bool { return false }
