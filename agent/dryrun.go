package agent

import (
	"io"
	"strings"

	"github.com/nodereg/nodereg/protocol"
)

// redactingWriter is a dry run's output: it prints what the run would write
// (the registration config, the hook, the system-agent files, commands),
// but without the secrets those carry, which an admin's terminal or a CI
// log must not keep (issue 12). Each Write is redacted on its own; the
// printing edges write a file's content in one call, so no secret is split.
type redactingWriter struct {
	w io.Writer
	r *run
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	s := string(p)
	for _, secret := range rw.r.secrets() {
		s = protocol.Redact(s, secret)
	}
	if _, err := io.WriteString(rw.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// secrets are the values this run knows that must never be printed: the
// registration token, the system-agent token and the cloud-config's
// passwords. The config is the local one until the server's reply is
// merged, so the list is built at each write.
func (r *run) secrets() []string {
	if r.cfg == nil {
		return nil
	}
	out := []string{
		protocol.RegistrationToken(r.cfg.Elemental.Registration.URL),
		r.cfg.Elemental.SystemAgent.Token,
	}
	for k, v := range r.cfg.CloudConfig {
		out = appendPasswords(out, k, v.Value)
	}
	return out
}

// appendPasswords adds the string values under keys that name a password
// (passwd, password, hashed_passwd, plain_text_passwd, ...) anywhere in v.
func appendPasswords(out []string, key string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			out = appendPasswords(out, k, e)
		}
	case []any:
		for _, e := range v {
			out = appendPasswords(out, key, e)
		}
	case string:
		if k := strings.ToLower(key); strings.Contains(k, "passw") {
			out = append(out, v)
		}
	}
	return out
}
