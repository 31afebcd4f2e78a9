package control

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// SocketName is the daemon's socket inside its cache dir. Holding the
// cache dir's lock makes a process the only one that may listen on it.
const SocketName = "dsmount.sock"

// MountRequest is what `dsmount mount` sends a running daemon over its
// socket, one JSON line; the daemon answers one MountReply line.
type MountRequest struct {
	// Version is the protocol version the client speaks; 0 means 1.
	Version     int    `json:"version,omitempty"`
	Source      string `json:"source"`
	Mountpoint  string `json:"mountpoint"`
	S3Endpoint  string `json:"s3_endpoint,omitempty"`
	S3PathStyle bool   `json:"s3_path_style,omitempty"`
	Anonymous   bool   `json:"anonymous,omitempty"`
	Refresh     bool   `json:"refresh,omitempty"`
	AllowOther  bool   `json:"allow_other,omitempty"`
	FastPath    string `json:"fast_path,omitempty"`
	// Cache settings the user gave explicitly; they must match the daemon's.
	CacheSize int64  `json:"cache_size,omitempty"`
	ChunkSize int64  `json:"chunk_size,omitempty"`
	Policy    string `json:"policy,omitempty"`

	FollowExternalSymlinks bool `json:"follow_external_symlinks,omitempty"`

	// Profile and Region (s3:// sources) name the AWS profile and region
	// to use (--profile, --region); empty: the daemon's configuration.
	Profile string `json:"profile,omitempty"`
	Region  string `json:"region,omitempty"`
	// Credentials are the joining shell's static AWS keys: a mount is read
	// with the keys of whoever mounts it, not the daemon's. The socket
	// serves the daemon's own user and root alone (0600, SO_PEERCRED).
	Credentials *Credentials `json:"credentials,omitempty"`
	// Hold binds the mount to this connection (see the package doc):
	// hanging up unmounts it, and a MountEnded line says when it is gone.
	Hold bool `json:"hold,omitempty"`
}

// Credentials are static AWS keys (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
type Credentials struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token,omitempty"`
}

// MountReply answers a MountRequest: an error, or the mount's size.
type MountReply struct {
	Error string `json:"error,omitempty"`
	Pid   int    `json:"pid"`
	Files int    `json:"files"`
	Dirs  int    `json:"dirs"`
}

// MountEnded is the last line on a held connection: why its mount is
// gone.
type MountEnded struct {
	Ended string `json:"ended"`
}

// Why a held mount ended (MountEnded.Ended).
const (
	EndedUnmounted     = "unmounted"
	EndedDaemonExiting = "daemon_exiting"
)

// DecodeMountRequest reads one request line and checks what can be
// checked before mounting: a version this package speaks, a source, an
// absolute mountpoint, no NUL in either, and sizes that aren't negative.
// The fast path's name is the daemon's to check. Errors are one line.
func DecodeMountRequest(line []byte) (MountRequest, error) {
	var r MountRequest
	if err := json.Unmarshal(line, &r); err != nil {
		return MountRequest{}, fmt.Errorf("malformed request: %w", err)
	}
	switch {
	case r.Version < 0 || r.Version > Version:
		return MountRequest{}, fmt.Errorf("request of protocol version %d refused: this daemon speaks version %d (upgrade it)", r.Version, Version)
	case r.Source == "" || strings.ContainsRune(r.Source, 0):
		return MountRequest{}, fmt.Errorf("malformed request: source %q", r.Source)
	case !strings.Contains(r.Source, "://") && !filepath.IsAbs(r.Source):
		// The CLI sends local sources absolute; a relative one would
		// resolve against the daemon's directory.
		return MountRequest{}, fmt.Errorf("malformed request: local source %q is not an absolute path", r.Source)
	case !filepath.IsAbs(r.Mountpoint) || strings.ContainsRune(r.Mountpoint, 0):
		return MountRequest{}, fmt.Errorf("malformed request: mountpoint %q is not an absolute path", r.Mountpoint)
	case r.CacheSize < 0 || r.ChunkSize < 0:
		return MountRequest{}, fmt.Errorf("malformed request: cache size %d, chunk size %d", r.CacheSize, r.ChunkSize)
	}
	r.Mountpoint = filepath.Clean(r.Mountpoint)
	return r, nil
}
