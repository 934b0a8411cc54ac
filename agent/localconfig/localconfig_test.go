package localconfig

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

func writeConfig(t *testing.T, root, text string) {
	t.Helper()
	p := filepath.Join(root, host.ConfigFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func captureLog() (*logrus.Entry, *bytes.Buffer) {
	var buf bytes.Buffer
	l := logrus.New()
	l.Out = &buf
	l.Formatter = &logrus.TextFormatter{DisableTimestamp: true, DisableColors: true}
	return logrus.NewEntry(l), &buf
}

func TestUnknownConfigKeysAreWarnedWithTheClosestKnownKey(t *testing.T) {
	root := t.TempDir()
	writeConfig(t, root, `elemental:
  registration:
    url: https://reg.example/elemental/registration/t
    tpm_device: /dev/tpm0
    netwrk-config: explicit
    labels: {anything-goes: "yes"}
    bootstrap-network:
      configurator: nmconnections
  instal:
    device: /dev/sda
  install:
    device-selector:
    - key: Name
      operatr: In
cloud-config:
  users: [{name: root}]
`)
	log, buf := captureLog()
	if _, err := Read(host.Root(root), host.ConfigFile, Overrides{}, log); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	file := filepath.Join(root, host.ConfigFile)
	for _, want := range []string{
		file + ":4: unknown key elemental.registration.tpm_device: ignored (did you mean elemental.registration.tpm-device?)",
		file + ":5: unknown key elemental.registration.netwrk-config: ignored (did you mean elemental.registration.network-config?)",
		file + ":9: unknown key elemental.instal: ignored (did you mean elemental.install?)",
		"unknown key elemental.install.device-selector[0].operatr: ignored (did you mean elemental.install.device-selector[0].operator?)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing warning %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "level=warning"); n != 4 {
		t.Errorf("%d warnings, want 4 (labels and cloud-config take any key; package bootstrap reads bootstrap-network):\n%s", n, out)
	}
}

func TestUnknownKeyFarFromAnyGetsNoSuggestion(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("elemental:\n  registration:\n    completely-unrelated: 1\n"), &doc); err != nil {
		t.Fatal(err)
	}
	got := unknownKeys("c.yaml", &doc)
	if len(got) != 1 || got[0].Closest != "" || got[0].Key != "elemental.registration.completely-unrelated" {
		t.Fatalf("%+v", got)
	}
}

func TestCAIsReadUnderRootAndCheckedAtLoad(t *testing.T) {
	root := t.TempDir()
	writeConfig(t, root, "elemental:\n  registration:\n    url: https://reg.example/r/t\n    ca-cert: /etc/ca.pem\n")
	// Missing under the root: a person must fix it (78), not a retry.
	_, err := Read(host.Root(root), host.ConfigFile, Overrides{}, nil)
	if exitcode.Of(err) != exitcode.Config || !strings.Contains(err.Error(), "elemental.registration.ca-cert") || !strings.Contains(err.Error(), filepath.Join(root, "etc/ca.pem")) {
		t.Fatalf("missing CA: exit %d: %v", exitcode.Of(err), err)
	}
	// Present but not PEM.
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/ca.pem"), []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Read(host.Root(root), host.ConfigFile, Overrides{}, nil)
	// CAPEM refuses a file with no PEM block before the certificate pool
	// is tried: either message names the cause.
	if exitcode.Of(err) != exitcode.Config || !(strings.Contains(err.Error(), "no PEM certificate") || strings.Contains(err.Error(), "no PEM block")) {
		t.Fatalf("garbage CA: exit %d: %v", exitcode.Of(err), err)
	}
	// Given on the command line, the error names the flag.
	flagCA := "/nonexistent/ca.pem"
	_, err = Read(host.Root(root), host.ConfigFile, Overrides{CACert: &flagCA}, nil)
	if exitcode.Of(err) != exitcode.Config || !strings.HasPrefix(err.Error(), "--registration-ca-cert") {
		t.Fatalf("flag CA: exit %d: %v", exitcode.Of(err), err)
	}
}

// elemental.registration.nmstate is local: read from the file (no
// unknown-key warning), overridden by --nmstate, checked with the key
// named, and never set by a server reply decoded onto the config.
func TestNmstateChoiceIsLocal(t *testing.T) {
	base := "elemental:\n  registration:\n    url: https://reg.example/elemental/registration/t\n"
	for _, tc := range []struct {
		file, flag string
		want       apply.NmstateChoice
		err        string
	}{
		{"", "", apply.NmstateAuto, ""},
		{"    nmstate: builtin\n", "", apply.NmstateBuiltin, ""},
		{"    nmstate: builtin\n", "nmstatectl", apply.NmstateNmstatectl, ""},
		{"", "builtin", apply.NmstateBuiltin, ""},
		{"    nmstate: nmstate-rs\n", "", "", NmstateKey + `: "nmstate-rs" is not auto, builtin or nmstatectl`},
		{"    nmstate: nmstate-rs\n", "auto", apply.NmstateAuto, ""},
	} {
		root := t.TempDir()
		writeConfig(t, root, base+tc.file)
		o := Overrides{}
		if tc.flag != "" {
			o.Nmstate = &tc.flag
		}
		log, buf := captureLog()
		f, err := Read(host.Root(root), host.ConfigFile, o, log)
		var got apply.NmstateChoice
		if f != nil {
			got = f.Nmstate
		}
		if tc.err != "" {
			if !strings.Contains(fmt.Sprint(err), tc.err) || exitcode.Of(err) != exitcode.Config {
				t.Errorf("%q: want a config error %q, got %v", tc.file, tc.err, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("file %q flag %q: got %q, %v; want %q", tc.file, tc.flag, got, err, tc.want)
		}
		if strings.Contains(buf.String(), "unknown key") {
			t.Errorf("%q warned: %s", tc.file, buf.String())
		}
	}
	// A server reply carrying the key: decoded onto the config, it lands
	// nowhere (the config has no such field) and the run's choice, read
	// from the file alone, is untouched.
	var cfg protocol.Config
	if _, err := protocol.DecodeConfigReply([]byte(`{"elemental":{"registration":{"url":"https://reg.example/x","nmstate":"nmstatectl"}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "nmstate") {
		t.Errorf("a server reply set the nmstate choice:\n%s", b)
	}
}
