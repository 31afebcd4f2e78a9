package backend

import (
	"errors"
	"fmt"
)

// Kinds of backend failure. Test with errors.Is(err, backend.ErrNotFound).
var (
	// ErrNotFound: the bucket, prefix, directory or object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrChanged: the object no longer has the version the caller named.
	ErrChanged = errors.New("object changed since it was listed")
	// ErrThrottled: the store asked us to slow down and retries ran out.
	ErrThrottled = errors.New("throttled by the store")
	// ErrUnavailable: the store could not be reached or failed (network
	// error, timeout, 5xx) and retries ran out.
	ErrUnavailable = errors.New("store unavailable")
	// ErrPermission: credentials are missing, wrong, or lack access.
	ErrPermission = errors.New("permission denied")
	// ErrInvalid: the request itself is malformed (bad key, bad range,
	// bad source URL).
	ErrInvalid = errors.New("invalid request")
)

// Error is the error type every backend operation fails with.
type Error struct {
	Op   string // "list", "stat", "read", "open"
	Key  string // object key or source, if any
	Kind error  // one of the Err* sentinels above
	Err  error  // underlying cause; may be nil
}

func (e *Error) Error() string {
	s := e.Op
	if e.Key != "" {
		s += " " + e.Key
	}
	s += ": " + e.Kind.Error()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes both the kind and the cause to errors.Is / errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Errorf builds an *Error of the given kind with a formatted cause.
func Errorf(op, key string, kind error, format string, args ...any) *Error {
	return &Error{Op: op, Key: key, Kind: kind, Err: fmt.Errorf(format, args...)}
}

// Wrap builds an *Error of the given kind around cause.
func Wrap(op, key string, kind, cause error) *Error {
	return &Error{Op: op, Key: key, Kind: kind, Err: cause}
}
