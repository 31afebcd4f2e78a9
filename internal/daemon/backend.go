package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/posix"
	"github.com/dsmount/dsmount/backend/s3"
	"github.com/dsmount/dsmount/internal/control"
)

// CheckSource refuses a source the daemon can't open, and options that
// don't apply to its kind, before anything is opened: the CLI calls it to
// report a usage error, OpenBackend to refuse a request from the socket.
func CheckSource(req control.MountRequest) error {
	if strings.HasPrefix(req.Source, "s3://") {
		if req.FollowExternalSymlinks {
			return fmt.Errorf("--follow-external-symlinks applies to local sources only")
		}
		if req.Anonymous && (req.Profile != "" || req.Credentials != nil) {
			return fmt.Errorf("--anonymous reads without credentials: drop --profile (or AWS keys)")
		}
		return nil
	}
	if i := strings.Index(req.Source, "://"); i > 0 {
		return fmt.Errorf("unsupported source %q: want s3://BUCKET[/PREFIX] or a local directory", req.Source)
	}
	if req.S3Endpoint != "" || req.S3PathStyle || req.Anonymous || req.Profile != "" || req.Region != "" || req.Credentials != nil {
		return fmt.Errorf("--s3-endpoint, --s3-path-style, --anonymous, --profile, --region and AWS credentials apply to s3:// sources only")
	}
	return nil
}

// OpenBackend opens the request's source: an S3 bucket (prefix) or a
// local directory.
func OpenBackend(ctx context.Context, req control.MountRequest, log *slog.Logger) (backend.Backend, error) {
	if err := CheckSource(req); err != nil {
		return nil, err
	}
	if strings.HasPrefix(req.Source, "s3://") {
		opts := s3.Options{Endpoint: req.S3Endpoint, PathStyle: req.S3PathStyle, Anonymous: req.Anonymous, Profile: req.Profile, Region: req.Region, Logger: log}
		if c := req.Credentials; c != nil {
			opts.Credentials = &aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken, Source: "dsmount mount"}
		}
		return s3.New(ctx, req.Source, opts)
	}
	return posix.New(req.Source, posix.Options{Logger: log, FollowExternalSymlinks: req.FollowExternalSymlinks})
}
