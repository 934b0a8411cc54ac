package systemd

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// upstreamRoot is an Elemental image's root as far as registration goes:
// elemental-register as its RPM installs it (/usr/sbin, nothing else), the
// four units the image carries in /usr/lib/systemd/system, and the timer
// enabled. The units are written here in their shape (oneshot services
// started by the timer, the live ISO's install and the reset plan; only the
// timer has an [Install] section), not copied.
func upstreamRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	svc := func(desc, args, cond string) string {
		return "[Unit]\nDescription=" + desc + "\nWants=network-online.target\nAfter=network-online.target\n" + cond +
			"\n[Service]\nType=oneshot\nExecStart=/usr/sbin/elemental-register " + args + "\nRestart=on-failure\n"
	}
	files := map[string]string{
		"usr/sbin/elemental-register":                               "#!/bin/sh\necho upstream\n",
		"usr/lib/systemd/system/elemental-register.service":         svc("upstream register", "--debug /run/initramfs/live", ""),
		"usr/lib/systemd/system/elemental-register-install.service": svc("upstream install", "--debug --install", ""),
		"usr/lib/systemd/system/elemental-register-reset.service":   svc("upstream reset", "--debug --reset", "ConditionPathExists=/run/cos/recovery_mode\n"),
		"usr/lib/systemd/system/elemental-register.timer":           "[Unit]\nDescription=upstream register timer\n\n[Timer]\nOnStartupSec=5\nOnUnitInactiveSec=30min\n\n[Install]\nWantedBy=timers.target\n",
	}
	for p, text := range files {
		full := filepath.Join(root, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		mode := os.FileMode(0o644)
		if strings.HasPrefix(p, "usr/sbin/") {
			mode = 0o755
		}
		must(t, os.WriteFile(full, []byte(text), mode))
	}
	systemctl(t, root, "enable", "elemental-register.timer")
	if got := enabledUnits(t, root); !slices.Equal(got, []string{"elemental-register.timer"}) {
		t.Fatalf("the upstream root's enabled units: %v", got)
	}
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func systemctl(t *testing.T, root string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skip("systemctl not found: install the Debian package \"systemd\" to check the enabled units")
	}
	var stderr strings.Builder
	cmd := exec.Command("systemctl", append([]string{"--root=" + root}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && args[0] != "is-enabled" {
		t.Fatalf("systemctl --root %v: %v\n%s%s", args, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// enabledUnits are the unit files systemctl --root reports enabled.
func enabledUnits(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(systemctl(t, root, "list-unit-files", "--state=enabled", "--no-legend"), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	slices.Sort(out)
	return out
}

// tree lists the files and links under root, relative, sorted.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// snapshot is every file's content (a link's target) under root.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range tree(t, root) {
		full := filepath.Join(root, p)
		if target, err := os.Readlink(full); err == nil {
			m[p] = "-> " + target
			continue
		}
		b, err := os.ReadFile(full)
		must(t, err)
		m[p] = string(b)
	}
	return m
}

// TestInstallOverUpstreamRefusesWithNothingWritten: without the explicit
// choice, an install into an Elemental image writes nothing at all.
func TestInstallOverUpstreamRefusesWithNothingWritten(t *testing.T) {
	agent, _ := builtAgent(t)
	root := upstreamRoot(t)
	before := snapshot(t, root)
	out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent)
	if err == nil || !strings.Contains(out, "ELEMENTAL_REGISTER=replace") {
		t.Fatalf("make install over upstream: err %v, want a refusal naming ELEMENTAL_REGISTER=replace:\n%s", err, out)
	}
	if after := snapshot(t, root); !mapsEqual(before, after) {
		t.Errorf("a refused install changed the root:\nbefore %v\nafter  %v", keys(before), keys(after))
	}
}

// TestInstallReplacesUpstream: ELEMENTAL_REGISTER=replace takes over: exactly
// nodereg's units enabled, upstream's masked (the reset unit an alias of
// nodereg-reset, for the operator's reset plan), the compatibility links in
// place, upstream's binary kept aside. A second run changes nothing.
func TestInstallReplacesUpstream(t *testing.T) {
	agent, content := builtAgent(t)
	root := upstreamRoot(t)
	upstreamBin := snapshot(t, root)["usr/sbin/elemental-register"]
	for run := 1; run <= 2; run++ {
		if out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent, "ELEMENTAL_REGISTER=replace"); err != nil {
			t.Fatalf("make install ELEMENTAL_REGISTER=replace (run %d): %v\n%s", run, err, out)
		}
	}
	want := []string{"nodereg-install.service", "nodereg-update.timer", "nodereg-verify.service", "nodereg.service"}
	if got := enabledUnits(t, root); !slices.Equal(got, want) {
		t.Errorf("enabled units %v, want exactly %v", got, want)
	}
	for _, u := range []string{"elemental-register.service", "elemental-register.timer", "elemental-register-install.service"} {
		if got := systemctl(t, root, "is-enabled", u); got != "masked" {
			t.Errorf("%s is %q, want masked", u, got)
		}
	}
	if got, err := os.Readlink(filepath.Join(root, "etc/systemd/system/elemental-register-reset.service")); err != nil || got != "/usr/lib/systemd/system/nodereg-reset.service" {
		t.Errorf("elemental-register-reset.service in /etc -> %q (%v), want nodereg-reset.service", got, err)
	}
	if got := systemctl(t, root, "is-enabled", "elemental-register-reset.service"); got == "masked" || got == "enabled" {
		t.Errorf("elemental-register-reset.service is %q: the reset plan starts it, it must be nodereg-reset's alias", got)
	}
	assertLink(t, filepath.Join(root, "usr/sbin/elemental-register"), "nodereg-agent")
	if got, err := os.ReadFile(filepath.Join(root, "usr/sbin/nodereg-agent")); err != nil || string(got) != string(content) {
		t.Errorf("nodereg-agent: %q %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "usr/sbin/elemental-register.upstream")); err != nil || string(got) != upstreamBin {
		t.Errorf("upstream's binary not kept aside: %q %v", got, err)
	}
	for _, p := range tree(t, root) {
		if strings.HasSuffix(p, ".nodereg-new") {
			t.Errorf("left behind: %s", p)
		}
	}
}

// TestInstallNeverHalf: a target that cannot be written (the unit
// directory is a file) is found before anything is written.
func TestInstallNeverHalf(t *testing.T) {
	agent, _ := builtAgent(t)
	root := filepath.Join(t.TempDir(), "root")
	must(t, os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "usr/lib/systemd/system"), []byte("not a directory"), 0o644))
	before := snapshot(t, root)
	out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent)
	if err == nil || !strings.Contains(out, "nothing written") {
		t.Fatalf("make install with the unit directory a file: err %v:\n%s", err, out)
	}
	if after := snapshot(t, root); !mapsEqual(before, after) {
		t.Errorf("half an install: %v", keys(after))
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestInstallSystemdEnable: SYSTEMD_ENABLE=yes on a plain root enables
// nodereg's units with an [Install] section and nothing else.
func TestInstallSystemdEnable(t *testing.T) {
	agent, _ := builtAgent(t)
	root := filepath.Join(t.TempDir(), "root")
	if out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent, "SYSTEMD_ENABLE=yes"); err != nil {
		t.Fatalf("make install SYSTEMD_ENABLE=yes: %v\n%s", err, out)
	}
	want := []string{"nodereg-install.service", "nodereg-update.timer", "nodereg-verify.service", "nodereg.service"}
	if got := enabledUnits(t, root); !slices.Equal(got, want) {
		t.Errorf("enabled units %v, want %v", got, want)
	}
}
