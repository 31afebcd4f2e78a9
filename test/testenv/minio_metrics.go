package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Metrics.
//
// What was verified about MinIO's metrics (this MinIO version; the source is
// cmd/metrics-v2.go, metrics-v3-api.go, handler-utils.go:collectAPIStats and
// http-stats.go; TestMinIOMetricsExact in this package re-checks it on every
// run):
//
//   - /minio/v2/metrics/cluster AND /minio/v2/metrics/node serve the S3 HTTP
//     group (minio_s3_requests_total{api="getobject"},
//     minio_s3_traffic_sent_bytes) from a cache refreshed at most every 10 s
//     (getHTTPMetrics/getNetworkMetrics: cacheInterval 10s). Measured: a GET
//     showed up in both only 10.1 s later. Useless for "no GETs happened".
//   - /minio/metrics/v3/api/requests is read live on every scrape (no cache):
//     minio_api_requests_total{name="GetObject",type="s3"} (v3 names APIs in
//     CamelCase) and minio_api_requests_traffic_sent_bytes{type="s3"}. But
//     MinIO bumps the node-wide total only after the handler returns, and it
//     drops the node-wide in-flight gauge just before that, so for a large
//     body (whose tail net/http writes straight to the socket) there is a
//     short window in which a client has its bytes and the GET is in neither
//     series. Measured: scraping right after each of 400 GETs (8 MiB and
//     100 B alternately), the node-wide total was one short 44 times.
//   - /minio/metrics/v3/bucket/api/<bucket> has per-bucket series
//     minio_bucket_api_inflight_total and minio_bucket_api_total; MinIO
//     bumps the bucket's in-flight gauge BEFORE serving and moves the request
//     from in-flight to total under one lock afterwards, so in-flight + total
//     counts every GET that has reached a handler, with no window.
//     GetObjectCount sums that over all buckets: a GET is counted before the
//     client can see a byte of its answer, which makes "zero GETs during a
//     pass" exact. (Only requests on existing buckets are counted per bucket.)
//     Measured: the same 400 GETs, 0 misses.
//   - Bytes: the per-bucket traffic series have sent/received swapped in this
//     MinIO version (cmd/metrics-v3-api.go, loadBucketAPIHTTPMetrics, sets
//     traffic_sent_bytes from the bucket's input bytes), so GetObjectCount
//     reports the node-wide
//     minio_api_requests_traffic_sent_bytes (every S3 response's bytes, all
//     APIs: GET bodies plus LIST/HEAD/error XML), which is updated when a
//     request completes (so, unlike the count, it can trail a GET that a
//     client has just finished reading by a moment).
//   - A series that is still zero is not emitted at all (a fresh server
//     serves an empty page), so a missing series reads as 0: a renamed metric
//     would read as "0 GETs" for ever. TestMinIOMetricsExact checks that GETs
//     move the count, and the integration tests check that a cold pass does.
//   - Scraping metrics and /minio/health/* are not S3 API calls and move none
//     of these counters; ListBuckets (which GetObjectCount uses to find the
//     buckets) is counted only node-wide, as "listbuckets".

// GetObjectCount returns the number of GetObject requests MinIO has started
// serving on any bucket (in flight + finished), and the bytes it has sent in
// completed S3 responses of any kind. It fails the test if the metrics cannot
// be read.
func (m *MinIO) GetObjectCount() (requests int64, bytesSent int64) {
	m.t.Helper()
	requests, bytesSent, err := m.GetObjectCountErr(context.Background())
	if err != nil {
		m.t.Fatalf("reading MinIO metrics: %v", err)
	}
	return requests, bytesSent
}

// GetObjectCountErr is GetObjectCount with an error result.
func (m *MinIO) GetObjectCountErr(ctx context.Context) (requests int64, bytesSent int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := m.Client().ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		return 0, 0, fmt.Errorf("ListBuckets: %w", err)
	}
	for _, b := range out.Buckets {
		st, err := m.BucketAPIStats(aws.ToString(b.Name))
		if err != nil {
			return 0, 0, err
		}
		requests += st.Requests["getobject"] + st.InFlight["getobject"]
	}
	st, err := m.APIStats()
	if err != nil {
		return 0, 0, err
	}
	return requests, st.SentBytes, nil
}

const metricsV3Requests = "/minio/metrics/v3/api/requests"

// APIStats is a snapshot of MinIO's S3 API counters.
type APIStats struct {
	Requests  map[string]int64 // by API name: "getobject", "headobject", "listobjectsv2", ...
	Errors    map[string]int64 // requests answered with 4xx/5xx, by API name
	InFlight  map[string]int64 // requests being served now, by API name
	SentBytes int64            // bytes of all S3 responses
	RecvBytes int64            // bytes of all S3 requests
}

// APIStats scrapes the node-wide /minio/metrics/v3/api/requests. Its
// Requests are bumped when a request completes (see the notes above).
func (m *MinIO) APIStats() (APIStats, error) {
	return m.scrapeAPIStats(metricsV3Requests)
}

// BucketAPIStats scrapes /minio/metrics/v3/bucket/api/<bucket>. Its
// InFlight+Requests count a request from before its handler runs. Its
// SentBytes and RecvBytes are left zero (MinIO swaps them in this series).
func (m *MinIO) BucketAPIStats(bucket string) (APIStats, error) {
	s, err := m.scrapeAPIStats("/minio/metrics/v3/bucket/api/" + bucket)
	s.SentBytes, s.RecvBytes = 0, 0
	return s, err
}

func (m *MinIO) scrapeAPIStats(path string) (APIStats, error) {
	s := APIStats{Requests: map[string]int64{}, Errors: map[string]int64{}, InFlight: map[string]int64{}}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(m.Endpoint() + path)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	samples, err := ParsePrometheus(string(body))
	if err != nil {
		return s, fmt.Errorf("GET %s: %w", path, err)
	}
	for _, sm := range samples {
		name, labels := sm.Name, sm.Labels
		if labels["type"] != "s3" {
			continue
		}
		v := int64(sm.Value)
		api := strings.ToLower(labels["name"]) // v3 says "GetObject", v2 "getobject"
		// Node-wide series are minio_api_requests_<x>, per-bucket ones
		// minio_bucket_api_<x>.
		x, ok := strings.CutPrefix(name, "minio_api_requests_")
		if !ok {
			if x, ok = strings.CutPrefix(name, "minio_bucket_api_"); !ok {
				continue
			}
		}
		switch x {
		case "total":
			s.Requests[api] += v
		case "errors_total":
			s.Errors[api] += v
		case "inflight_total":
			s.InFlight[api] += v
		case "traffic_sent_bytes":
			s.SentBytes += v
		case "traffic_received_bytes":
			s.RecvBytes += v
		}
	}
	return s, nil
}
