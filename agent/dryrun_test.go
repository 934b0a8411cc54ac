package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

// A dry run prints file contents; the registration token, the system-agent
// token and cloud-config passwords (at any depth) come out redacted.
func TestRedactingWriter(t *testing.T) {
	cfg := &protocol.Config{CloudConfig: map[string]protocol.RawValue{
		"users":       {Value: []any{map[string]any{"name": "root", "passwd": "pw-users-91c2"}}},
		"chpasswd":    {Value: map[string]any{"list": "x", "Password": "pw-chpasswd-4d0e"}},
		"write_files": {Value: []any{map[string]any{"path": "/etc/motd", "content": "hello"}}},
	}}
	cfg.Elemental.Registration.URL = "https://reg.example/elemental/registration/regtok-5a1b"
	cfg.Elemental.SystemAgent.Token = "satok-77e0"
	var out bytes.Buffer
	w := redactingWriter{w: &out, r: &run{cfg: cfg}}
	in := "url: https://reg.example/elemental/registration/regtok-5a1b\ntoken: satok-77e0\nbare regtok-5a1b\n" +
		"passwd: pw-users-91c2 pw-chpasswd-4d0e\ncontent: hello\n"
	n, err := w.Write([]byte(in))
	if err != nil || n != len(in) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	for _, secret := range []string{"regtok-5a1b", "satok-77e0", "pw-users-91c2", "pw-chpasswd-4d0e"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("printed %q:\n%s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), "content: hello") || strings.Count(out.String(), protocol.Redacted) != 5 {
		t.Errorf("redacted more or less than the secrets:\n%s", out.String())
	}
}
