package agent

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/handover"
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
	s := redactor{}.learn(cfg)
	w := redactingWriter{w: &out, s: s}
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

// A dry run prints the cloud-config as cloudInit renders it: every
// password cloud-init accepts (chpasswd's list as text or as a list, its
// users, numbers, values of one to three bytes) is gone from the printed
// file, and what is not secret (user names, paths) is printed as it is.
func TestRedactingWriterCloudConfig(t *testing.T) {
	cc := map[string]protocol.RawValue{}
	for k, v := range map[string]string{
		"users": `[{name: admin, passwd: pw1, hashed_passwd: "$6$x$hashedsecret"}, {name: ops, plain_text_passwd: 4242}]`,
		"chpasswd": `{expire: false, list: "root:s3\nadmin:multi-line-secret\n",
			users: [{name: root, password: ab, type: text}, {name: bob, password: "RANDOM-bob-pw"}]}`,
		"write_files": `[{path: /root/notes, content: "name: root\n"}]`,
	} {
		var rv protocol.RawValue
		if err := yaml.Unmarshal([]byte(v), &rv); err != nil {
			t.Fatal(err)
		}
		cc[k] = rv
	}
	secrets := []string{"pw1", "$6$x$hashedsecret", "4242", "s3", "multi-line-secret", "ab", "RANDOM-bob-pw", "tk"}
	cfg := &protocol.Config{CloudConfig: cc}
	cfg.Elemental.SystemAgent.Token = "tk"
	file, err := handover.CloudInit(cc)
	if err != nil {
		t.Fatal(err)
	}
	file = append(file, "token: tk\n"...)
	var out bytes.Buffer
	s := redactor{}.learn(cfg)
	if _, err := (redactingWriter{w: &out, s: s}).Write(file); err != nil {
		t.Fatal(err)
	}
	// Every scalar of the printed file, and the password part of chpasswd
	// lines, must differ from every secret.
	var printed any
	if err := yaml.Unmarshal(out.Bytes(), &printed); err != nil {
		t.Fatalf("printed file is no longer YAML: %v\n%s", err, out.String())
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		default:
			s := fmt.Sprint(v)
			for _, line := range strings.Split(s, "\n") {
				_, pw, _ := strings.Cut(line, ":")
				if slices.Contains(secrets, line) || slices.Contains(secrets, pw) {
					t.Errorf("printed secret %q:\n%s", line, out.String())
				}
			}
		}
	}
	walk(printed)
	for _, s := range []string{"$6$x$hashedsecret", "multi-line-secret", "RANDOM-bob-pw", "4242"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("printed %q:\n%s", s, out.String())
		}
	}
	for _, kept := range []string{"name: root", "name: admin", "name: bob", "path: /root/notes", "type: text", "expire: false"} {
		if !strings.Contains(out.String(), kept) {
			t.Errorf("lost %q:\n%s", kept, out.String())
		}
	}
}
