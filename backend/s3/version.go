package s3

import (
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dsmount/dsmount/backend"
)

// lmPrefix starts the Version of an object the store gave no ETag for: the
// rest is its Last-Modified time (UTC, RFC 3339 with all the precision the
// store gave).
const lmPrefix = "lm:"

// versionOf is the Version of an object the store described with etag and
// lastModified (either may be missing). Without an ETag the version is bound
// to Last-Modified, so that a same-size overwrite still gets a new cache
// identity and ReadAt can tell its bytes from the listed ones; the first such
// object is worth one warning, since the store's clock says less than an
// ETag would.
func (b *Backend) versionOf(etag *string, lastModified *time.Time) string {
	if e := unquote(aws.ToString(etag)); e != "" {
		return e
	}
	if lastModified == nil || lastModified.IsZero() {
		b.warnNoVersion.Do(func() {
			b.log.Warn("s3: the store gives neither ETags nor Last-Modified times: an object rewritten at the same size can't be detected, and its old and new bytes may mix",
				"source", b.id)
		})
		return ""
	}
	b.warnNoETag.Do(func() {
		b.log.Warn("s3: the store gives no ETags; object versions are told apart by size and Last-Modified (1 s resolution): an object rewritten at the same size within a second or two can't be detected",
			"source", b.id)
	})
	return lmPrefix + lastModified.UTC().Format(time.RFC3339Nano)
}

// listedTime is the Last-Modified time a version made by versionOf holds.
func listedTime(version string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(version, lmPrefix)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, rest)
	return t, err == nil
}

// ifMatch is the If-Match value that pins version: its ETag, or "" for a
// version without one (the store would refuse any If-Match then).
func ifMatch(version string) string {
	if _, ok := listedTime(version); ok {
		return ""
	}
	return version
}

// checkAnswer fails with ErrChanged when a GET's answer is of another
// version than obj's. If-Match already guards ETag versions; checking the
// answer too covers S3-compatible stores that ignore conditional headers.
// A version bound to Last-Modified is checked against the answer's
// Last-Modified header, which has 1 s resolution: an answer stamped later
// than the listed time rounded up to the second is of a newer object. An
// answer that names no version at all can't be checked and passes.
func checkAnswer(obj backend.Object, etag, lastModified string) error {
	listed, lm := listedTime(obj.Version)
	if !lm {
		if etag := unquote(etag); obj.Version != "" && etag != "" && etag != obj.Version {
			return backend.Errorf("read", obj.Key, backend.ErrChanged, "ETag %q, want %q", etag, obj.Version)
		}
		return nil
	}
	if lastModified == "" {
		return nil
	}
	got, err := http.ParseTime(lastModified)
	if err != nil {
		// Without a readable time the bytes can't be tied to the listed
		// version; serving them could mix versions.
		return backend.Errorf("read", obj.Key, backend.ErrChanged, "unreadable Last-Modified %q: the version can't be checked", lastModified)
	}
	// The header has whole seconds: a store may truncate the listed time
	// or round it up, so the answer may say the listed second or the next
	// when the listed time has a fraction.
	want := listed.Truncate(time.Second)
	if listed.After(want) {
		want = want.Add(time.Second)
	}
	if got.After(want) {
		return backend.Errorf("read", obj.Key, backend.ErrChanged, "Last-Modified %s, listed %s",
			got.UTC().Format(time.RFC3339), listed.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
