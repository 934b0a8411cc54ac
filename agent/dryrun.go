package agent

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/protocol"
)

// redactingWriter is a dry run's output: it prints what the run would write
// (the registration config, the hook, the system-agent files, commands),
// but without the secrets those carry, which an admin's terminal or a CI
// log must not keep (docs/reliability.md, "Secrets" and "Hostile server"). Each
// Write is redacted on its own; the printing edges write a file's content
// in one call, so no secret is split.
type redactingWriter struct {
	w io.Writer
	s redactor
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	s := string(p)
	for _, secret := range rw.s.seen {
		s = protocol.RedactSecret(s, secret)
	}
	if _, err := io.WriteString(rw.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactor is the values this run knows that must never be printed: the
// registration token, the system-agent token and the cloud-config's
// passwords of every config the run got (the local one, then each
// registration's), longest first so that a secret holding a shorter one
// (a chpasswd line and its password) goes whole. A value: learn returns
// a new one, and the phase runner makes each phase's output from the
// configs the phases before it returned (handoffs.secrets).
type redactor struct {
	seen []string
}

// learn is r with cfg's secrets added.
func (r redactor) learn(cfg *protocol.Config) redactor {
	if cfg == nil {
		return r
	}
	add := []string{
		protocol.RegistrationToken(cfg.Elemental.Registration.URL),
		cfg.Elemental.SystemAgent.Token,
	}
	for k, v := range cfg.CloudConfig {
		add = appendPasswords(add, k, v.Value, false)
	}
	out := append(slices.Clone(r.seen), add...)
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return redactor{seen: slices.Compact(out)}
}

// appendPasswords adds every string (and number) beneath a key that names
// a password (passwd, password, hashed_passwd, chpasswd, ...) anywhere in
// v: cloud-init nests them (chpasswd.list, chpasswd.users[].password).
// Only the user names and password types under chpasswd.users are left
// out: they are not secret, and "root" redacted everywhere would garble
// paths. A chpasswd "user:password" line also yields its password alone.
func appendPasswords(out []string, key string, v any, secret bool) []string {
	secret = secret || strings.Contains(strings.ToLower(key), "passw")
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if secret && (k == "name" || k == "type") {
				continue
			}
			out = appendPasswords(out, k, e, secret)
		}
	case []any:
		for _, e := range v {
			out = appendPasswords(out, key, e, secret)
		}
	case string:
		if !secret {
			break
		}
		out = append(out, v)
		for line := range strings.Lines(v) {
			if _, pw, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && pw != "" {
				out = append(out, pw)
			}
		}
	case int, int64, uint64, float64:
		if secret {
			out = append(out, fmt.Sprint(v))
		}
	}
	return out
}
