package s3

import (
	"net/url"
	"strings"

	"github.com/dsmount/dsmount/backend"
)

// errEndpointCredentials words the refusal of an endpoint URL with user
// information; it never repeats the URL, whose password it would show.
const errEndpointCredentials = "credentials in the endpoint URL are not accepted: pass them as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"

// checkEndpoint refuses an endpoint (named what in the message) that is not
// an http:// or https:// URL with a host, or that carries user information.
// The endpoint becomes part of the source ID, and so of the mount's name in
// /proc/mounts, of logs, stats and cache records: a password in it would be
// shown to every user of the machine.
func checkEndpoint(source, what, endpoint string) error {
	u, err := url.Parse(endpoint)
	// Without a scheme ("user:pw@host"), or unparsable, a URL's user
	// information isn't in u.User; an '@' has no other business in an
	// endpoint.
	if (err == nil && u.User != nil) || strings.Contains(endpoint, "@") {
		return backend.Errorf("open", source, backend.ErrInvalid, "%s: %s", what, errEndpointCredentials)
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return backend.Errorf("open", source, backend.ErrInvalid, "%s %q must be an http:// or https:// URL", what, endpoint)
	}
	return nil
}
