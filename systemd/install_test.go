package systemd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runMake runs install.mk's install target from an unrelated directory, so
// the fragment must find its units on its own, as when the top-level
// Makefile includes it.
func runMake(t *testing.T, vars ...string) (string, error) {
	t.Helper()
	return runMakeIn(t, t.TempDir(), vars...)
}

// runMakeIn is runMake from dir, where the default AGENT_BIN (bin/...) is
// looked for.
func runMakeIn(t *testing.T, dir string, vars ...string) (string, error) {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not found: install the Debian package \"make\" to test install.mk")
	}
	frag, err := filepath.Abs("install.mk")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mk, append([]string{"-f", frag, "install"}, vars...)...)
	cmd.Dir = dir
	// An outer make's flags (e.g. -n or -j from `make test`) must not leak in.
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func builtAgent(t *testing.T) (string, []byte) {
	t.Helper()
	content := []byte("#!/bin/sh\necho nodereg\n")
	p := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(p, content, 0o700); err != nil {
		t.Fatal(err)
	}
	return p, content
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	if fi.Mode() != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
	}
}

func assertLink(t *testing.T, path, target string) {
	t.Helper()
	got, err := os.Readlink(path)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	if got != target {
		t.Errorf("%s -> %s, want -> %s", path, got, target)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s dangles: %v", path, err)
	}
}

func TestInstallIntoDestdir(t *testing.T) {
	agent, content := builtAgent(t)
	root := filepath.Join(t.TempDir(), "root")
	for run := 1; run <= 2; run++ { // a second install over the first must work
		if out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent); err != nil {
			t.Fatalf("make install (run %d): %v\n%s", run, err, out)
		}
	}

	bin := filepath.Join(root, "usr/sbin/nodereg-agent")
	assertMode(t, bin, 0o755)
	if got, err := os.ReadFile(bin); err != nil || !bytes.Equal(got, content) {
		t.Errorf("installed agent = %q, %v; want the built one", got, err)
	}
	assertLink(t, filepath.Join(root, "usr/sbin/elemental-register"), "nodereg-agent")

	unitDir := filepath.Join(root, "usr/lib/systemd/system")
	for _, name := range units {
		p := filepath.Join(unitDir, name)
		assertMode(t, p, 0o644)
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// With the default PREFIX nothing is rewritten.
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("installed %s differs from systemd/%s (%v)", name, name, err)
		}
	}
	assertLink(t, filepath.Join(unitDir, "elemental-register-reset.service"), "nodereg-reset.service")

	entries, err := os.ReadDir(unitDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(units)+1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("unit dir holds %v, want the %d units and the reset alias only", names, len(units))
	}
}

// TestInstallPrefixVerifies installs without DESTDIR under a temp PREFIX,
// so the installed units name a binary that really exists, and verifies
// those units as installed.
func TestInstallPrefixVerifies(t *testing.T) {
	agent, _ := builtAgent(t)
	prefix := filepath.Join(t.TempDir(), "opt")
	if out, err := runMake(t, "PREFIX="+prefix, "AGENT_BIN="+agent); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "sbin/nodereg-agent")
	unitDir := filepath.Join(prefix, "lib/systemd/system")
	for _, name := range units {
		b, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "="+agentPath) {
			t.Errorf("%s still names %s after install with PREFIX=%s", name, agentPath, prefix)
		}
		if strings.HasSuffix(name, ".service") && !strings.Contains(string(b), "ExecStart="+bin+" ") {
			t.Errorf("%s: ExecStart does not run %s", name, bin)
		}
	}

	analyze := needAnalyze(t)
	for _, name := range units {
		if out := verify(t, analyze, filepath.Join(unitDir, name)); out != "" {
			t.Errorf("verify of installed %s printed:\n%s", name, out)
		}
	}
}

func TestInstallKeepsForeignFiles(t *testing.T) {
	agent, _ := builtAgent(t)
	root := filepath.Join(t.TempDir(), "root")
	upstream := filepath.Join(root, "usr/sbin/elemental-register")
	if err := os.MkdirAll(filepath.Dir(upstream), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(upstream, []byte("upstream binary"), 0o755); err != nil {
		t.Fatal(err)
	}

	out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent)
	if err == nil {
		t.Errorf("make install replaced or ignored a foreign elemental-register:\n%s", out)
	} else if !strings.Contains(out, "upstream's elemental-register is installed") || !strings.Contains(out, "nothing written") {
		t.Errorf("make install failed without saying why:\n%s", out)
	}
	if got := tree(t, root); !slices.Equal(got, []string{"usr/sbin/elemental-register"}) {
		t.Errorf("a refused install wrote %v", got)
	}
	if got, _ := os.ReadFile(upstream); string(got) != "upstream binary" {
		t.Errorf("foreign elemental-register now holds %q", got)
	}

	if out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent, "COMPAT_LINKS=no"); err != nil {
		t.Fatalf("make install COMPAT_LINKS=no: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(upstream); string(got) != "upstream binary" {
		t.Errorf("COMPAT_LINKS=no still touched elemental-register: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "usr/lib/systemd/system/elemental-register-reset.service")); !os.IsNotExist(err) {
		t.Errorf("COMPAT_LINKS=no still linked the reset alias (%v)", err)
	}
	assertMode(t, filepath.Join(root, "usr/sbin/nodereg-agent"), 0o755)
}

func TestInstallNeedsABuiltAgent(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+filepath.Join(t.TempDir(), "agent"))
	if err == nil || !strings.Contains(out, "build it first") {
		t.Errorf("make install without a built agent: err=%v, output:\n%s", err, out)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("make install wrote into DESTDIR before failing (%v)", err)
	}
}

// EMULATED=yes installs bin/nodereg-agent-emulated, not bin/nodereg-agent, and a missing
// one is named with the target that builds it.
func TestInstallEmulatedBuild(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(t.TempDir(), "root")
	out, err := runMakeIn(t, dir, "DESTDIR="+root, "EMULATED=yes")
	if err == nil || !strings.Contains(out, "bin/nodereg-agent-emulated not found") || !strings.Contains(out, "make build-emulated") {
		t.Errorf("EMULATED=yes without the build: err=%v, output:\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"nodereg-agent": "#!/bin/sh\necho default\n", "nodereg-agent-emulated": "#!/bin/sh\necho emulated\n"} {
		if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for emulated, want := range map[string]string{"yes": "emulated", "no": "default"} {
		if out, err := runMakeIn(t, dir, "DESTDIR="+root, "EMULATED="+emulated); err != nil {
			t.Fatalf("make install EMULATED=%s: %v\n%s", emulated, err, out)
		}
		if got, _ := os.ReadFile(filepath.Join(root, "usr/sbin/nodereg-agent")); !strings.Contains(string(got), "echo "+want) {
			t.Errorf("EMULATED=%s installed %q, want the %s build", emulated, got, want)
		}
	}
}
