package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/internal/version"
)

// Options configures New. The zero value uses the standard AWS configuration
// chain against AWS S3 itself.
type Options struct {
	// Endpoint is the base URL of an S3-compatible store
	// ("http://127.0.0.1:9000"). Empty means AWS, or AWS_ENDPOINT_URL(_S3)
	// when set.
	Endpoint string
	// PathStyle addresses buckets as endpoint/bucket instead of
	// bucket.endpoint; most S3-compatible servers need it.
	PathStyle bool
	// Anonymous sends unsigned requests (public buckets) and never looks
	// for credentials, so it never waits on EC2 instance metadata.
	Anonymous bool
	// Region overrides the configured region. When neither is set,
	// "us-east-1" is used, and New follows S3's hint if the bucket lives
	// elsewhere.
	Region string
	// MaxConns is how many requests the caller runs at once; it sizes the
	// idle connection pool so connections are reused rather than churned.
	// Default 128.
	MaxConns int
	// ListParallel is how many listings List runs at once (list.go).
	// Default 32.
	ListParallel int
	// Profile names the shared configuration profile (~/.aws/config and
	// credentials) to use instead of AWS_PROFILE's or the default.
	Profile string
	// Credentials, if set, are used instead of the configuration's: a
	// mount that joins a running daemon hands it the joining shell's
	// static keys this way.
	Credentials *aws.Credentials
	// Logger receives retry warnings. Nil discards them.
	Logger *slog.Logger
}

// userAgent names dsmount and its version to the store (its access logs).
var userAgent = "dsmount/" + version.String()

// Backend reads objects under one bucket prefix.
type Backend struct {
	client *s3.Client
	// raw makes ReadAt's GETs and List's requests without the SDK's
	// operation stack (get.go, listraw.go); nil where the SDK must.
	raw    *rawGetter
	bucket string
	prefix string // "" or ends in '/'
	id     string
	log    *slog.Logger
	conns  *connSet
	tail   *tail // answer times, timeouts, hedges (tail.go)
	// listParallel is Options.ListParallel.
	listParallel int

	// Said once per backend: the store gives no ETags, or not even
	// Last-Modified times (version.go).
	warnNoETag, warnNoVersion sync.Once
}

var _ backend.Backend = (*Backend)(nil)

const (
	defaultMaxConns = 128
	sdkAttempts     = 5
	// A connection that delivers no byte for this long is dropped (and the
	// request retried); without it a stalled socket would hang a FUSE read
	// until the caller gives up.
	readIdleTimeout = 30 * time.Second
	dialTimeout     = 10 * time.Second
	// New's probe must fail in seconds on an unreachable endpoint, not
	// after the SDK's full retry schedule.
	probeAttemptTimeout = 4 * time.Second
	probeAttempts       = 3
	probeMaxBackoff     = 500 * time.Millisecond
)

// New connects to source ("s3://bucket" or "s3://bucket/prefix") and checks
// that it can list it, so a wrong bucket, wrong credentials or an unreachable
// endpoint fail here with a one-line *backend.Error rather than on first use.
// An endpoint URL with credentials in it (Options.Endpoint or the AWS
// configuration's) is refused with backend.ErrInvalid, without repeating it.
func New(ctx context.Context, source string, opts Options) (*Backend, error) {
	bucket, prefix, err := parseSource(source)
	if err != nil {
		return nil, err
	}
	if opts.Endpoint != "" {
		if err := checkEndpoint(source, "endpoint", opts.Endpoint); err != nil {
			return nil, err
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = defaultMaxConns
	}

	// The SDK only applies AWS_CA_BUNDLE to its own BuildableClient, so the
	// transport is tuned through it rather than replaced.
	hc := awshttp.NewBuildableClient().
		WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = maxConns
			t.MaxIdleConnsPerHost = maxConns
		}).
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = dialTimeout }).
		WithReadTimeout(readIdleTimeout)
	loadOpts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(hc),
		config.WithRetryer(func() aws.Retryer {
			// The default token bucket runs dry under many concurrent
			// readers and turns transient errors into hard failures.
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = sdkAttempts
				o.RateLimiter = ratelimit.None
			})
		}),
		// Ranged GETs carry no full-object checksum to validate.
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(opts.Profile))
	}
	switch {
	case opts.Anonymous:
		loadOpts = append(loadOpts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	case opts.Credentials != nil:
		loadOpts = append(loadOpts, config.WithCredentialsProvider(credentials.StaticCredentialsProvider{Value: *opts.Credentials}))
	}
	// The SDK's requests carry the version in their User-Agent; the raw
	// GETs set theirs (get.go).
	loadOpts = append(loadOpts, config.WithAppID(userAgent))
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, backend.Wrap("open", source, backend.ErrInvalid, fmt.Errorf("loading AWS configuration: %w", err))
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if !opts.Anonymous && cfg.Credentials != nil {
		cfg.Credentials = credsMarker{cfg.Credentials}
	}

	conns := newConnSet()
	b := &Backend{bucket: bucket, prefix: prefix, log: log, conns: conns, tail: newTail(), listParallel: opts.ListParallel}
	b.client = newClient(cfg, opts, conns)
	b.id = "s3://" + bucket + "/" + prefix
	if ep := aws.ToString(b.client.Options().BaseEndpoint); ep != "" {
		if opts.Endpoint == "" && strings.Contains(ep, "@") {
			// The AWS configuration's endpoint (AWS_ENDPOINT_URL_S3,
			// AWS_ENDPOINT_URL, a profile's endpoint_url) would go
			// into the ID just the same.
			b.Close()
			return nil, backend.Errorf("open", source, backend.ErrInvalid, "the endpoint from the AWS configuration: %s", errEndpointCredentials)
		}
		// Two stores can hold buckets of the same name; the endpoint
		// keeps their cache entries apart.
		b.id += "@" + strings.TrimRight(ep, "/")
	}

	var bucketURL url.URL
	err = b.probe(ctx, &bucketURL)
	if region := bucketRegion(err); region != "" && region != cfg.Region && opts.Region == "" {
		log.Info("s3: bucket is in another region, switching", "bucket", bucket, "region", region)
		cfg.Region = region
		b.client = newClient(cfg, opts, conns)
		err = b.probe(ctx, &bucketURL)
	}
	if err != nil {
		b.Close()
		return nil, b.openError(ctx, source, err)
	}
	var creds aws.CredentialsProvider
	if !opts.Anonymous {
		creds = cfg.Credentials
	}
	b.raw = newRawGetter(b.client.Options().HTTPClient, bucketURL, bucket, cfg.Region, creds)
	return b, nil
}

func newClient(cfg aws.Config, opts Options, conns *connSet) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		o.DisableLogOutputChecksumValidationSkipped = true
		// The client has finished tuning its BuildableClient by now (it
		// replaces the dialer), so this is the last point to hook dials.
		if bc, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
			o.HTTPClient = bc.WithTransportOptions(func(t *http.Transport) {
				t.DialContext = conns.track(t.DialContext)
			})
		}
	})
}

// probe lists at most one key under the prefix, with a short per-attempt
// timeout and few quick retries, and records the bucket's URL as the SDK
// addressed it in bucketURL.
func (b *Backend) probe(ctx context.Context, bucketURL *url.URL) error {
	_, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(b.bucket),
		Prefix:  optional(b.prefix),
		MaxKeys: aws.Int32(1),
	}, func(o *s3.Options) {
		if bc, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
			o.HTTPClient = bc.WithTimeout(probeAttemptTimeout)
		}
		o.RetryMaxAttempts = probeAttempts
		o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, probeMaxBackoff)
		o.APIOptions = append(o.APIOptions, captureBucketURL(bucketURL))
	})
	return err
}

// openError words New's failures for a command line.
func (b *Backend) openError(ctx context.Context, source string, err error) error {
	e := classify(ctx, "open", source, err)
	if errors.Is(e, backend.ErrNotFound) && apiCode(err) == "NoSuchBucket" {
		e.Err = &cause{msg: fmt.Sprintf("bucket %q does not exist", b.bucket), err: e.Err}
	}
	if region := bucketRegion(err); region != "" {
		e.Err = &cause{msg: fmt.Sprintf("%v (the bucket is in region %s)", e.Err, region), err: e.Err}
	}
	return e
}

// RequestStats counts the GETs made for reads, their hedges, timeouts and
// retries (backend.StatsReporter).
func (b *Backend) RequestStats() backend.RequestStats { return b.tail.stats() }

// Throttled counts the answers asking for fewer requests
// (backend.ThrottleCounter).
func (b *Backend) Throttled() int64 { return b.tail.throttled.Load() }

// ID returns "s3://bucket/prefix/", followed by "@endpoint" when an endpoint
// other than AWS's own is in use.
func (b *Backend) ID() string { return b.id }

// Close drops the backend's connections. Calls made after Close fail with
// ErrUnavailable.
func (b *Backend) Close() error {
	b.conns.closeAll()
	b.tail.run.close()
	return nil
}

// parseSource splits "s3://bucket/prefix" into the bucket and a prefix that is
// empty or ends in '/'.
func parseSource(source string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(source, "s3://")
	if !ok {
		return "", "", backend.Errorf("open", source, backend.ErrInvalid, "source must look like s3://bucket[/prefix]")
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return "", "", backend.Errorf("open", source, backend.ErrInvalid, "%q is not a valid bucket name", bucket)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// validBucket accepts the characters S3 and common S3-compatible stores allow
// in bucket names (including legacy upper case and '_'), to catch typos such
// as a port or a query string before any request is made.
func validBucket(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}
