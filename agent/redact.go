package agent

import (
	"net/url"
	"strings"
)

// RedactURL is the registration URL fit for a log: its last path segment
// is the registration token (…/elemental/registration/<token>), and a
// password in it is replaced too.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if i := strings.LastIndexByte(u.Path, '/'); i >= 0 && i < len(u.Path)-1 {
		u.Path = u.Path[:i+1] + "REDACTED"
	}
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.Redacted()
}
