package localconfig

import (
	"strings"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

const localPEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIBATAKBggqhkjOPQQDAjA=\n-----END CERTIFICATE-----\n"

// TestKeepLocal decodes hostile replies on top of a local config, as the
// agent does, and checks what survives.
func TestKeepLocal(t *testing.T) {
	local := protocol.Config{Elemental: protocol.Elemental{Registration: protocol.Registration{
		URL: "https://reg.example/elemental/registration/tok", CACert: "/etc/nodereg/ca.pem",
		TPMDevice: "unix:///run/swtpm.sock", NetworkConfig: "explicit", Labels: map[string]string{"rack": "r1"}, Auth: "tpm",
	}}}
	for _, c := range []struct {
		name, reply string
		key         string // the key warned about; "" for none
		check       func(r protocol.Registration) bool
	}{
		{"tpm-device", "tpm-device: /dev/sda", "tpm-device", func(r protocol.Registration) bool { return r.TPMDevice == "unix:///run/swtpm.sock" }},
		{"network-config", "network-config: auto", "network-config", func(r protocol.Registration) bool { return r.NetworkConfig == "explicit" }},
		{"no-toolkit", "no-toolkit: true", "no-toolkit", func(r protocol.Registration) bool { return !r.NoToolkit }},
		{"labels", "labels: {rack: evil}", "labels", func(r protocol.Registration) bool { return r.Labels["rack"] == "r1" && len(r.Labels) == 1 }},
		{"ca-cert path", "ca-cert: /dev/zero", "ca-cert", func(r protocol.Registration) bool { return r.CACert == "/etc/nodereg/ca.pem" }},
		{"ca-cert huge PEM", "ca-cert: \"-----BEGIN CERTIFICATE-----\\n" + strings.Repeat("A", 1<<20+10) + "\\n-----END CERTIFICATE-----\\n\"", "ca-cert", func(r protocol.Registration) bool { return r.CACert == "/etc/nodereg/ca.pem" }},
		{"ca-cert PEM", "ca-cert: |\n            " + strings.ReplaceAll(strings.TrimSpace(localPEM), "\n", "\n            "), "", func(r protocol.Registration) bool { return strings.HasPrefix(r.CACert, "-----BEGIN CERTIFICATE-----") }},
		{"url to http", "url: http://reg.example/elemental/registration/tok", "url", func(r protocol.Registration) bool { return r.URL == "https://reg.example/elemental/registration/tok" }},
		{"url to file", "url: file:///etc/shadow", "url", func(r protocol.Registration) bool { return strings.HasPrefix(r.URL, "https://reg.example/") }},
		{"url to another https host", "url: https://new.example/elemental/registration/tok2", "", func(r protocol.Registration) bool { return r.URL == "https://new.example/elemental/registration/tok2" }},
		{"auth stays the server's", "auth: mac", "", func(r protocol.Registration) bool { return r.Auth == "mac" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			merged := local // DecodeConfigReply decodes onto its own copy
			reply := "elemental:\n    registration:\n        " + c.reply + "\n"
			if _, err := protocol.DecodeConfigReply([]byte(reply), &merged); err != nil {
				t.Fatal(err)
			}
			warns := KeepLocal(local, &merged)
			if !c.check(merged.Elemental.Registration) {
				t.Errorf("after KeepLocal: %+v", merged.Elemental.Registration)
			}
			switch {
			case c.key == "" && len(warns) > 0:
				t.Errorf("unexpected warnings %q", warns)
			case c.key != "" && (len(warns) != 1 || !strings.Contains(warns[0], "elemental.registration."+c.key+" is ignored")):
				t.Errorf("warnings %q, want one about %s", warns, c.key)
			}
			for _, w := range warns {
				if strings.Contains(w, "tok") {
					t.Errorf("warning prints the token: %s", w)
				}
				t.Log(w)
			}
		})
	}
}

// A reply that moves the URL where KeepLocal lets it is warned about with
// both URLs, tokens redacted; a reply that keeps it, or one KeepLocal put
// back, is not.
func TestMovedURL(t *testing.T) {
	local := protocol.Config{}
	local.Elemental.Registration.URL = "https://reg.example/elemental/registration/tok"
	for _, c := range []struct {
		reply string
		moved bool
	}{
		{"url: https://new.example/elemental/registration/tok2", true},
		{"url: https://reg.example/elemental/registration/tok", false},
		{"url: http://new.example/elemental/registration/tok2", false},
		{"auth: mac", false},
	} {
		merged := local
		if _, err := protocol.DecodeConfigReply([]byte("elemental:\n    registration:\n        "+c.reply+"\n"), &merged); err != nil {
			t.Fatal(err)
		}
		KeepLocal(local, &merged)
		w := MovedURL(local, merged)
		switch {
		case !c.moved && w != "":
			t.Errorf("%s: unexpected warning %q", c.reply, w)
		case c.moved && (!strings.Contains(w, "https://reg.example/") || !strings.Contains(w, "https://new.example/")):
			t.Errorf("%s: warning %q, want both URLs", c.reply, w)
		case strings.Contains(w, "tok"):
			t.Errorf("%s: the warning prints a token: %s", c.reply, w)
		}
	}
}
