// Package redact keeps secrets out of logs and error messages. Every place
// that prints a configured URL (the Redis URL, the S3 endpoint, the REST
// catalog URL) passes it through URL first.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask stands in for a removed secret.
const Mask = "***"

// URL returns raw with the password of its user info replaced by Mask:
// redis://user:pass@host/0 becomes redis://user:***@host/0. A URL that
// does not parse has its whole user info masked, since where the
// password ends cannot be told.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return maskUserinfo(raw)
	}
	if u.Opaque != "" && strings.Contains(u.Opaque, "@") {
		// "user:pass@host" without "//" parses as scheme "user".
		return maskUserinfo(raw)
	}
	if u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); !ok {
		return raw
	}
	// url.UserPassword would escape the mask as %2A%2A%2A.
	user := url.User(u.User.Username()).String()
	u.User = nil
	s := u.String()
	scheme := u.Scheme + "://"
	if !strings.HasPrefix(s, scheme) {
		return maskUserinfo(raw)
	}
	return scheme + user + ":" + Mask + "@" + s[len(scheme):]
}

// maskUserinfo masks everything between the scheme and the last '@' of
// the authority.
func maskUserinfo(raw string) string {
	rest, prefix := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	// The authority ends at the first '/', '?' or '#' after the last '@'
	// that precedes it; a password may itself hold '/' or '@', so take
	// the last '@' of the whole rest.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	return prefix + Mask + "@" + rest[at+1:]
}

// ParseURL is url.Parse with an error that does not quote the URL, which
// *url.Error does, password included: callers name the URL themselves,
// through URL.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, ue.Err
		}
		return nil, err
	}
	return u, nil
}

// URLError returns err with the URL of a *url.Error in it redacted: the
// net/url and net/http errors quote the whole URL. A *url.Error stays
// one; an error that wraps one keeps its text but loses its chain.
func URLError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	shown := URL(ue.URL)
	if shown == ue.URL {
		return err
	}
	if err == error(ue) {
		return &url.Error{Op: ue.Op, URL: shown, Err: ue.Err}
	}
	return errors.New(strings.ReplaceAll(err.Error(), ue.URL, shown))
}
