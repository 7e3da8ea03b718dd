package sameorigin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MaxRedirects is how many redirects one request follows, as many as
// net/http allows by default.
const MaxRedirects = 10

// Error says why a redirect was refused. http.Client returns it wrapped
// in a *url.Error. It names origins only (scheme, host, port): never a
// path, a query or user information, which could hold a secret.
type Error struct {
	// From is the origin of the request that started the chain.
	From string
	// To is the redirect target's origin.
	To string
	// Reason is what differs: "scheme", "host", "port", or "too many
	// redirects".
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Reason == reasonTooMany {
		return fmt.Sprintf("redirect refused: more than %d redirects from %s", MaxRedirects, e.From)
	}
	return fmt.Sprintf("redirect from %s to %s refused: another %s (credentials stay with the configured origin; configure the target URL instead)",
		e.From, e.To, e.Reason)
}

const reasonTooMany = "too many redirects"

// CheckRedirect is an http.Client CheckRedirect function: it allows req
// only if its scheme, host and port are those of via[0], the request that
// started the chain, and at most [MaxRedirects] redirects came before it.
// A redirect from https to http therefore always fails, as does one to
// another port of the same host. Hosts compare case-insensitively and
// without a trailing dot; a missing port is the scheme's default.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	first := via[0].URL
	from := Of(first)
	if len(via) > MaxRedirects {
		return &Error{From: from.String(), Reason: reasonTooMany}
	}
	to := Of(req.URL)
	if reason := from.differs(to); reason != "" {
		return &Error{From: from.String(), To: to.String(), Reason: reason}
	}
	return nil
}

// Guard returns a copy of c (or of a zero client when c is nil) whose
// redirects pass [CheckRedirect] first and then c's own CheckRedirect, if
// it has one.
func Guard(c *http.Client) *http.Client {
	var g http.Client
	if c != nil {
		g = *c
	}
	next := g.CheckRedirect
	g.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := CheckRedirect(req, via); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &g
}

// Origin is a URL's scheme, host and port in their compared form.
type Origin struct {
	// Scheme is lower case.
	Scheme string
	// Host is lower case, without brackets or a trailing dot.
	Host string
	// Port is explicit: the scheme's default when the URL has none.
	Port string
}

// Of returns u's origin.
func Of(u *url.URL) Origin {
	o := Origin{
		Scheme: strings.ToLower(u.Scheme),
		Host:   strings.TrimSuffix(strings.ToLower(u.Hostname()), "."),
		Port:   u.Port(),
	}
	if o.Port == "" {
		switch o.Scheme {
		case "http":
			o.Port = "80"
		case "https":
			o.Port = "443"
		}
	}
	return o
}

// String returns the origin as scheme://host:port.
func (o Origin) String() string {
	host := o.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return o.Scheme + "://" + host + ":" + o.Port
}

func (o Origin) differs(p Origin) string {
	switch {
	case o.Scheme != p.Scheme:
		return "scheme"
	case o.Host != p.Host:
		return "host"
	case o.Port != p.Port:
		return "port"
	}
	return ""
}
