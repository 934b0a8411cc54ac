package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/exitcode"
)

func writeConfig(t *testing.T, root, text string) {
	t.Helper()
	p := filepath.Join(root, DefaultConfigPath)
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
	if _, err := ReadConfig(root, DefaultConfigPath, Overrides{}, log); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	file := filepath.Join(root, DefaultConfigPath)
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
	got := unknownKeys("c.yaml", []byte("elemental:\n  registration:\n    completely-unrelated: 1\n"))
	if len(got) != 1 || got[0].Closest != "" || got[0].Key != "elemental.registration.completely-unrelated" {
		t.Fatalf("%+v", got)
	}
}

func TestCAIsReadUnderRootAndCheckedAtLoad(t *testing.T) {
	root := t.TempDir()
	writeConfig(t, root, "elemental:\n  registration:\n    url: https://reg.example/r/t\n    ca-cert: /etc/ca.pem\n")
	// Missing under the root: a person must fix it (78), not a retry.
	_, err := ReadConfig(root, DefaultConfigPath, Overrides{}, nil)
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
	_, err = ReadConfig(root, DefaultConfigPath, Overrides{}, nil)
	// CAPEM refuses a file with no PEM block before the certificate pool
	// is tried: either message names the cause.
	if exitcode.Of(err) != exitcode.Config || !(strings.Contains(err.Error(), "no PEM certificate") || strings.Contains(err.Error(), "no PEM block")) {
		t.Fatalf("garbage CA: exit %d: %v", exitcode.Of(err), err)
	}
	// Given on the command line, the error names the flag.
	flagCA := "/nonexistent/ca.pem"
	_, err = ReadConfig(root, DefaultConfigPath, Overrides{CACert: &flagCA}, nil)
	if exitcode.Of(err) != exitcode.Config || !strings.HasPrefix(err.Error(), "--registration-ca-cert") {
		t.Fatalf("flag CA: exit %d: %v", exitcode.Of(err), err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "abc", 0}, {"tpm-devce", "tpm-device", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
