package s3

import (
	"net/http"
	"sync/atomic"
	"time"
)

// A SigV4 signature carries its signing time, and S3 refuses one more than
// 15 minutes from its own clock (RequestTimeTooSkewed). The SDK corrects for
// a node whose clock is off by learning the offset from the Date header of
// the refusal and signing again; the lean GET path (get.go) does the same
// with its own skewClock, so the GETs keep working where the SDK's own
// requests (list, stat) would.

// skewThreshold is how far the signing time may be from the store's clock
// before a refusal is taken for clock skew; the SDK uses the same.
const skewThreshold = 4 * time.Minute

// clockSkewCodes are the answers a skewed signing time may get: S3 says
// RequestTimeTooSkewed, other stores a signature or access error. Each is
// taken for skew only when the store's Date is off by over skewThreshold.
var clockSkewCodes = map[string]bool{
	"RequestTimeTooSkewed":      true,
	"SignatureDoesNotMatch":     true,
	"InvalidSignatureException": true,
	"AuthFailure":               true,
	"AccessDenied":              true,
	"AccessDeniedException":     true,
	"RequestExpired":            true,
}

// skewClock is the time GETs are signed at: the node's clock plus the
// offset last learned from the store. Safe for concurrent use.
type skewClock struct {
	now    func() time.Time // the node's clock; tests set it off
	offset atomic.Int64     // nanoseconds to add to now
}

func newSkewClock() *skewClock { return &skewClock{now: time.Now} }

// signingTime is the time to sign a request at.
func (c *skewClock) signingTime() time.Time {
	return c.now().Add(time.Duration(c.offset.Load()))
}

// learn takes the store's Date from a refusal with code, of a request
// signed at signedAt. It reports whether the refusal is explained by
// clock skew, having set the offset so that a request signed now would
// not be.
func (c *skewClock) learn(code string, signedAt time.Time, resp *http.Response) bool {
	if !clockSkewCodes[code] || resp.Header.Get("Age") != "" { // a cached answer's Date is old
		return false
	}
	server, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return false
	}
	if d := server.Sub(signedAt); d > -skewThreshold && d < skewThreshold {
		return false // the clocks agree: the refusal is something else
	}
	c.offset.Store(int64(server.Sub(c.now())))
	return true
}
