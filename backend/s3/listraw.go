package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dsmount/dsmount/backend"
)

// List's pages are fetched, where the raw getter can sign for the store,
// as plain ListObjectsV2 requests (rawGetter.list) decoded by hand
// (listxml.go): through the SDK, a large listing's CPU went mostly to its
// XML deserializer, and the listing is what a first mount waits for.

// maxListPage bounds a ListObjectsV2 answer held in memory. A page of
// 1,000 keys of S3's longest (1,024 bytes, percent-encoded) is under
// 10 MB.
const maxListPage = 64 << 20

// listQuery is one listing walked page by page: the keys under prefix
// after startAfter, grouped at delimiter when it is set.
type listQuery struct {
	prefix, delimiter, startAfter string
}

// pages calls fn with each page of q in turn, until the last or fn's
// error, decoding them with dec. fn may change the page but not keep it:
// its slices are reused.
func (l *lister) pages(dec *pageDecoder, q listQuery, fn func(*listPage) error) error {
	if l.b.raw == nil {
		return l.sdkPages(q, fn)
	}
	token := ""
	for {
		page, err := l.rawPage(dec, q, token)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		// As the SDK's paginator: a truncated page without a token
		// ends the listing.
		if !page.truncated || page.next == "" {
			return nil
		}
		if page.next == token {
			// The SDK would ask for the same page forever.
			return backend.Errorf("list", l.b.id, backend.ErrUnavailable,
				"the store gave the same continuation token twice (prefix %q)", q.prefix)
		}
		token = page.next
	}
}

// sdkPages is pages through the SDK's paginator.
func (l *lister) sdkPages(q listQuery, fn func(*listPage) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(l.b.bucket), Prefix: optional(q.prefix),
		Delimiter: optional(q.delimiter), StartAfter: optional(q.startAfter)}
	pages := s3.NewListObjectsV2Paginator(l.b.client, in)
	var page listPage
	for pages.HasMorePages() {
		out, err := pages.NextPage(l.ctx)
		if err != nil {
			return classify(l.ctx, "list", l.b.id, err)
		}
		page.objs, page.prefixes = page.objs[:0], page.prefixes[:0]
		for _, o := range out.Contents {
			page.objs = append(page.objs, listObject{key: aws.ToString(o.Key), size: aws.ToInt64(o.Size),
				modTime: aws.ToTime(o.LastModified), etag: aws.ToString(o.ETag)})
		}
		for _, cp := range out.CommonPrefixes {
			page.prefixes = append(page.prefixes, aws.ToString(cp.Prefix))
		}
		if err := fn(&page); err != nil {
			return err
		}
	}
	return nil
}

// rawPage fetches one page, retrying what may succeed if asked again as
// often as the SDK would (sdkAttempts), backing off as ReadAt does.
func (l *lister) rawPage(dec *pageDecoder, q listQuery, token string) (*listPage, error) {
	delay := bodyBaseDelay
	for attempt := 1; ; attempt++ {
		page, err := l.fetchPage(dec, q, token)
		if err == nil {
			return page, nil
		}
		if !retryable(l.ctx, err) || l.b.conns.isClosed() {
			return nil, classify(l.ctx, "list", l.b.id, err)
		}
		if attempt == sdkAttempts {
			return nil, classify(l.ctx, "list", l.b.id, fmt.Errorf("%d attempts: %w", attempt, err))
		}
		l.b.log.Debug("s3: listing failed, retrying", "prefix", q.prefix, "start-after", q.startAfter, "attempt", attempt, "err", err)
		wait := delay
		if errors.Is(classify(l.ctx, "list", l.b.id, err), backend.ErrThrottled) || httpStatus(err) == 503 {
			wait *= throttleBackoff // the store asks for less: 0.4 to 3.2 s
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return nil, classify(l.ctx, "list", l.b.id, err)
		case <-t.C:
		}
		delay *= 2
	}
}

// fetchPage makes one ListObjectsV2 request and decodes its answer. A
// page that can't be decoded is reported as the SDK reports it (a
// *smithy.DeserializationError in a ResponseError of the answer's
// status), and is not asked for again.
func (l *lister) fetchPage(dec *pageDecoder, q listQuery, token string) (*listPage, error) {
	urlKeys := !l.b.raw.plainList.Load()
	query := url.Values{"list-type": {"2"}}
	if urlKeys {
		query.Set("encoding-type", "url")
	}
	set := func(k, v string) {
		if v != "" {
			query.Set(k, v)
		}
	}
	set("prefix", q.prefix)
	set("delimiter", q.delimiter)
	set("start-after", q.startAfter)
	set("continuation-token", token)
	// Encode writes a space as '+', which S3 may not read as one; the
	// signer encodes the query its own way in any case.
	resp, err := l.b.raw.list(l.ctx, strings.ReplaceAll(query.Encode(), "+", "%20"))
	if err != nil {
		if urlKeys && refusesURLKeys(err) {
			// A store that doesn't know the parameter: list as the
			// SDK does, keys as the XML carries them.
			if !l.b.raw.plainList.Swap(true) {
				l.b.log.Info("s3: the store refuses URL-encoded listings; listing without", "source", l.b.id, "err", describe(err))
			}
			return l.fetchPage(dec, q, token)
		}
		return nil, err
	}
	defer resp.Body.Close()
	buf := bytes.NewBuffer(dec.body[:0])
	if resp.ContentLength > 0 && resp.ContentLength <= maxListPage {
		buf.Grow(int(resp.ContentLength))
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, maxListPage+1))
	dec.body = buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("reading a ListObjectsV2 answer: %w", err)
	}
	if len(dec.body) > maxListPage {
		err = fmt.Errorf("ListObjectsV2 answer larger than %d MiB", maxListPage>>20)
	} else {
		var page *listPage
		if page, err = dec.decode(dec.body); err == nil {
			return page, nil
		}
	}
	return nil, &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp},
		Err: &smithy.DeserializationError{Err: err}}
}

// list makes one ListObjectsV2 request of the bucket with query (already
// encoded). Its URL is the one the SDK listed the bucket at in New.
func (g *rawGetter) list(ctx context.Context, query string) (*http.Response, error) {
	path, escaped := g.base.Path, g.base.EscapedPath()
	if path == "" {
		path, escaped = "/", "/"
	}
	return g.do(ctx, path, escaped, query, func(h http.Header) {
		// As the SDK asks: Go's transport would otherwise ask for gzip
		// and spend CPU inflating it.
		h.Set("Accept-Encoding", "identity")
	})
}

// refusesURLKeys reports whether a listing's failure may be the store
// refusing encoding-type=url, which S3 itself and MinIO accept but other
// S3-compatible stores need not.
func refusesURLKeys(err error) bool {
	switch httpStatus(err) {
	case 400:
		code := apiCode(err)
		return code == "InvalidArgument" || code == "NotImplemented"
	case 501:
		return true
	}
	return false
}
