package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An unregistered scratch root whose server listens: the registered
// finding fails and sets bit 1, the server (plain http) is reachable, the
// network findings say why they were not checked.
func TestVerifyExitIsTheFailedFindingsBits(t *testing.T) {
	t.Setenv("NODEREG_NMCLI", "nodereg-test-no-such-nmcli")
	url, _ := listener(t)
	root := scratchRoot(t, url)
	code, out, errs := run("verify", "--root", root, "--format", "json")
	var rep struct {
		Exit     int
		Findings []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --format json: %v\n%s%s", err, out, errs)
	}
	if code != 1 || rep.Exit != 1 {
		t.Fatalf("exit %d (report %d), want 1 (registered):\n%s", code, rep.Exit, out)
	}
	got := map[string]string{}
	for _, f := range rep.Findings {
		got[f.Name] = f.Status
	}
	want := map[string]string{"registered": "failed", "applicator": "not checked", "addresses": "not checked", "profiles": "not checked", "server": "ok", "bootstrap": "ok"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}

	// A state file recording a registration: exit 0, text says so.
	st := filepath.Join(root, "oem/registration/state.yaml")
	if err := os.WriteFile(st, []byte("initialRegistration: 2026-01-02T03:04:05Z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run("verify", "--root", root)
	if code != 0 || !strings.Contains(out, "verify: all checks passed (exit 0)") {
		t.Errorf("registered node: exit %d\n%s", code, out)
	}
	// A config that cannot be read: the server finding fails (16).
	if err := os.Remove(filepath.Join(root, "oem/registration/config.yaml")); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = run("verify", "--root", root); code != 16 || !strings.Contains(out, "does not exist") {
		t.Errorf("no config: exit %d, want 16\n%s", code, out)
	}
}

// nodereg-verify.service runs verify $NODEREG_ARGS $NODEREG_VERIFY_ARGS:
// the shared flags of examples/default/nodereg are taken (no exit 64), a
// config override is used (--registration-url to a server that does not
// listen fails the server finding, 16), and a mode is refused (64).
func TestVerifyTakesTheUnitsSharedArgs(t *testing.T) {
	t.Setenv("NODEREG_NMCLI", "nodereg-test-no-such-nmcli")
	url, _ := listener(t)
	root := scratchRoot(t, url)
	st := filepath.Join(root, "oem/registration/state.yaml")
	if err := os.WriteFile(st, []byte("initialRegistration: 2026-01-02T03:04:05Z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := []string{"--deadline", "20m", "--network-timeout", "20m", "--log-format", "json", "--label", "site=lab1"}
	b, err := os.ReadFile("../../examples/default/nodereg")
	if err != nil || !strings.Contains(string(b), `NODEREG_ARGS="`+strings.Join(shared, " ")+`"`) {
		t.Fatalf("examples/default/nodereg no longer sets NODEREG_ARGS to %q: update this test (%v)", shared, err)
	}
	if code, out, errs := run(append([]string{"verify", "--root", root}, shared...)...); code != 0 {
		t.Errorf("verify with the units' shared args: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ := run("verify", "--root", root, "--registration-url", "http://127.0.0.1:1/elemental/registration/x")
	if code != 16 {
		t.Errorf("verify --registration-url to nowhere: exit %d, want 16 (server)\n%s", code, out)
	}
	if code, _, errs := run("verify", "--root", root, "--reset"); code != 64 || !strings.Contains(errs, "verify is read-only: --reset") {
		t.Errorf("verify --reset: exit %d, want 64\n%s", code, errs)
	}
}

// The text report reads as one: a finding that could not be made says
// "not checked: why" once (never "not checked not checked"), and an nmcli
// that fails leaves the bootstrap finding not checked, not "ok".
func TestVerifyTextSaysNotCheckedOnceAndNoOkForWhatDidNotRun(t *testing.T) {
	url, _ := listener(t)
	root := scratchRoot(t, url)
	failing := filepath.Join(t.TempDir(), "nmcli")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'Error: NetworkManager is not running.' >&2\nexit 8\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODEREG_NMCLI", failing)
	_, out, errs := run("verify", "--root", root)
	if strings.Contains(out, "not checked not checked") || strings.Contains(out, "not checked  not checked") {
		t.Errorf("doubled words:\n%s", out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, rest, _ := strings.Cut(l, " ")
		lines[name] = strings.TrimSpace(rest)
	}
	for name, want := range map[string]string{
		"applicator": "not checked: the state file records no network config applied",
		"addresses":  "not checked: the state file records no addresses",
		"bootstrap":  "not checked: the active profiles could not be read (nmcli failed",
	} {
		if !strings.HasPrefix(lines[name], want) {
			t.Errorf("%s: %q, want it to start %q\n%s%s", name, lines[name], want, out, errs)
		}
	}
	if strings.HasPrefix(lines["bootstrap"], "ok") {
		t.Errorf("bootstrap ok although nmcli failed:\n%s", out)
	}
}

// A bootstrap preview that can never succeed is a configuration error
// (78), not "try again later": here a range for a scratch root with no
// /sys, whose refusal says --root moved it; with --set the same file
// previews with no root at all.
func TestRenderBootstrapPreviewThatCannotSucceedIs78(t *testing.T) {
	root := t.TempDir()
	seed := "../../examples/rancher/seedimage.yaml"
	code, out, errs := run("render", "--bootstrap", "-f", seed, "--root", root)
	if code != 78 || !strings.Contains(errs, "no system UUID, permanent MAC or serial") || !strings.Contains(errs, "--root moves /sys too") {
		t.Errorf("render --bootstrap -f under an empty root: exit %d, want 78 naming --root\n%s%s", code, out, errs)
	}
	code, out, errs = run("render", "--bootstrap", "-f", seed, "--set", "mac=52:54:00:12:34:56")
	if code != 0 || !strings.Contains(out, "first try 192.168.122.53") {
		t.Errorf("render --bootstrap -f --set mac: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = run("render", "--bootstrap", "--root", root)
	if code != 78 || !strings.Contains(errs, "off the node, render --bootstrap -f FILE --set mac=ADDRESS") {
		t.Errorf("render --bootstrap with no config: exit %d, want 78 pointing at -f\n%s", code, errs)
	}
}
