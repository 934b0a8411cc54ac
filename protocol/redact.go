package protocol

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// The registration token is the last path segment of the registration URL
// (docs/protocol.md §1.1). Anyone holding it can register machines, so it must
// not reach a log: not in the URL, not in what a server echoes back
// (upstream's and regserver's 404 body names the token it did not find).

// Redacted replaces a token in printed text.
const Redacted = "REDACTED"

// minBareToken: shorter tokens are replaced only where they stand in a
// registration path, since replacing every occurrence of, say, "t" would
// make the text unreadable; real tokens are long random strings.
const minBareToken = 6

// registrationPath is where a token stands in upstream's URLs
// (/elemental/registration/<token>). Only that path: the agent's own files
// live under /oem/registration/ and must print as they are.
var registrationPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(/elemental/registration/)[^/\s"'?#<>]+`) })

// RegistrationToken is the token of a registration URL: the path segment
// after ".../registration/", else the last path segment; "" when the path
// has none.
func RegistrationToken(u string) string {
	path := u
	if pu, err := url.Parse(u); err == nil {
		path = pu.EscapedPath()
	} else {
		// Unparsable: cut scheme and host by hand, so the token still goes.
		if i := strings.Index(path, "://"); i >= 0 {
			path = path[i+3:]
			if j := strings.IndexByte(path, '/'); j >= 0 {
				path = path[j:]
			} else {
				path = ""
			}
		}
		if i := strings.IndexAny(path, "?#"); i >= 0 {
			path = path[:i]
		}
	}
	if i := strings.LastIndex(path, "/registration/"); i >= 0 {
		path = path[i+len("/registration/"):]
		if j := strings.IndexByte(path, '/'); j >= 0 {
			path = path[:j]
		}
		return path
	}
	path = strings.TrimRight(path, "/")
	return path[strings.LastIndexByte(path, '/')+1:]
}

// RedactURL is u with its token replaced by Redacted, and a password in
// it masked, for logs.
func RedactURL(u string) string {
	tok := RegistrationToken(u)
	s := Redact(u, tok)
	if i := strings.LastIndex(s, "/"+tok); tok != "" && i >= 0 {
		s = s[:i+1] + Redacted + s[i+1+len(tok):]
	}
	if pu, err := url.Parse(s); err == nil && pu.User != nil {
		if _, ok := pu.User.Password(); ok {
			s = pu.Redacted()
		}
	}
	return s
}

// Redact removes token from s: wherever it stands in a registration path,
// and anywhere at all (also path- or query-escaped) when it is long enough
// to be told apart from ordinary words.
func Redact(s, token string) string {
	s = registrationPath().ReplaceAllString(s, "${1}"+Redacted)
	if len(token) < minBareToken {
		return s
	}
	forms := []string{token, url.PathEscape(token), url.QueryEscape(token)}
	if raw, err := url.PathUnescape(token); err == nil {
		forms = append(forms, raw)
	}
	for _, t := range forms {
		s = strings.ReplaceAll(s, t, Redacted)
	}
	return s
}

// minExactSecret: a known secret value (a password, a token read from the
// config) shorter than this is replaced only where it stands as a whole
// scalar (a line, a `key: ` value, a list item, quoted or not); longer ones
// wherever they occur. Replacing every "pw" or "1" in a printed file would
// make it unreadable, and a value that short is found as a whole scalar in
// what the agent prints (YAML and JSON it marshals itself).
const minExactSecret = 4

// RedactSecret removes a secret value the caller knows from s: unlike
// Redact, any non-empty value, however short (see minExactSecret), and a
// multi-line value line by line, since YAML prints it as an indented block.
// Registration paths are cleaned too.
func RedactSecret(s, secret string) string {
	s = Redact(s, secret)
	if strings.TrimSpace(secret) == "" {
		return s
	}
	if strings.Contains(secret, "\n") {
		for _, line := range strings.Split(secret, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				s = RedactSecret(s, line)
			}
		}
		return s
	}
	if len(secret) >= minExactSecret {
		return strings.ReplaceAll(s, secret, Redacted)
	}
	// A match takes the separator after it, so "[pw,pw]" needs two passes;
	// each pass removes at least one occurrence.
	re := wholeScalar(secret)
	for {
		r := re.ReplaceAllString(s, "${1}"+Redacted+"${2}")
		if r == s {
			return s
		}
		s = r
	}
}

// wholeScalar matches secret standing alone as a YAML or JSON scalar: at the
// start of a line or after ":", "- ", "[", "{" or ",", optionally quoted,
// and followed by the end of the line, ",", "]", "}" or a " #" comment.
// Quotes stay, so the printed YAML or JSON still parses.
func wholeScalar(secret string) *regexp.Regexp {
	q := regexp.QuoteMeta(secret)
	return regexp.MustCompile(`(?m)((?:^|[:,\[{]|- )[ \t]*["']?)` + q + `(["']?(?:[ \t]*(?:$|[,\]}])|[ \t]+#))`)
}

// RedactError is err with the token of registrationURL removed from what
// it prints, for errors made outside this package that may carry the URL
// (net/http's *url.Error quotes it whole).
func RedactError(err error, registrationURL string) error {
	return redactError(err, RegistrationToken(registrationURL))
}

// redactedError is err with the token removed from its text; errors.Is and
// errors.As still see err.
type redactedError struct {
	err   error
	token string
}

func (e *redactedError) Error() string { return Redact(e.err.Error(), e.token) }
func (e *redactedError) Unwrap() error { return e.err }

// redactError removes token from everything err prints. A server's
// MsgError text (*ErrorReply) and a refused upgrade's body
// (*HandshakeError), which callers may print on their own, are cleaned in
// place; the rest is wrapped.
func redactError(err error, token string) error {
	if err == nil || Redact(err.Error(), token) == err.Error() {
		return err
	}
	var er *ErrorReply
	if errors.As(err, &er) {
		er.Message = Redact(er.Message, token)
		if Redact(err.Error(), token) == err.Error() {
			return err
		}
	}
	// A refused upgrade's body (regserver's and upstream's 404 name the
	// token they did not find) is kept for callers that print it alone.
	var he *HandshakeError
	if errors.As(err, &he) {
		he.Body = Redact(he.Body, token)
		if Redact(err.Error(), token) == err.Error() {
			return err
		}
	}
	var se *StepError
	if errors.As(err, &se) && se == err {
		return &StepError{Step: se.Step, Err: redactError(se.Err, token)}
	}
	return &redactedError{err: err, token: token}
}
