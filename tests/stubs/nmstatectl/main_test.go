package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The test binary doubles as the stand-in when asked, so the CLI is tested
// as a process: exit codes, stdout, stderr.
func TestMain(m *testing.M) {
	if os.Getenv("NMSTATECTL_STUB_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

func call(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(append(os.Environ(), "NMSTATECTL_STUB_AS_MAIN=1"), env...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

const state = `interfaces:
- name: eth0
  type: ethernet
  state: up
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: 192.0.2.10
      prefix-length: 24
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 192.0.2.1
    next-hop-interface: eth0
`

func TestContract(t *testing.T) {
	dir := t.TempDir()
	env := []string{"NMSTATECTL_STUB_LOG=" + filepath.Join(dir, "log"), "NMSTATECTL_STUB_STATE=" + filepath.Join(dir, "cp")}
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
	}{
		{"version", "", []string{"version"}, 0, "nmstatectl 2.2.37\n"},
		{"quiet version", "", []string{"-q", "version"}, 0, "nmstatectl 2.2.37\n"},
		{"unknown global flag", "", []string{"--frobnicate", "version"}, 2, ""},
		{"unknown subcommand", "", []string{"show"}, 2, ""},
		{"unknown apply flag", state, []string{"apply", "--memory-only", "-"}, 2, ""},
		{"timeout not a number", state, []string{"apply", "--timeout", "soon", "-"}, 65, ""},
		{"malformed yaml", "interfaces: [", []string{"gc", "-"}, 1, ""},
		{"not a state", "foo: 1\n", []string{"apply", "-"}, 1, ""},
		{"bad address", strings.Replace(state, "192.0.2.10", "192.0.2.10\n  evil: 1", 1), []string{"gc", "-"}, 1, ""},
		{"commit without checkpoint", "", []string{"commit"}, 1, ""},
		{"apply no-commit", state, []string{"apply", "--no-commit", "--timeout", "60", "-"}, 0, state},
		{"commit", "", []string{"commit"}, 0, "\n"},
		{"rollback after commit", "", []string{"rollback"}, 1, ""},
	}
	for _, tc := range cases {
		r := call(t, env, tc.stdin, tc.args...)
		if r.code != tc.code {
			t.Errorf("%s: exit %d, want %d (stderr %q)", tc.name, r.code, tc.code, r.stderr)
		}
		if tc.out != "" && r.stdout != tc.out {
			t.Errorf("%s: stdout %q, want %q", tc.name, r.stdout, tc.out)
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	if n := strings.Count(string(log), "\n"); n != len(cases) {
		t.Errorf("%d calls logged, want %d", n, len(cases))
	}
}

func TestGCShape(t *testing.T) {
	r := call(t, nil, state, "gc", "-")
	if r.code != 0 {
		t.Fatalf("gc: %d %s", r.code, r.stderr)
	}
	var doc map[string][][]string
	if err := yaml.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	l := doc["NetworkManager"]
	if len(l) != 1 || l[0][0] != "eth0.nmconnection" {
		t.Fatalf("gc output %v", doc)
	}
	for _, want := range []string{"[connection]\n", "id=eth0\n", "address0=192.0.2.10/24\n", "route0=0.0.0.0/0,192.0.2.1\n", "route0_options=table=254\n", "method=manual\n"} {
		if !strings.Contains(l[0][1], want) {
			t.Errorf("keyfile lacks %q:\n%s", want, l[0][1])
		}
	}
	if !strings.HasPrefix(l[0][1], "[connection]\n") {
		t.Errorf("[connection] is not first")
	}
}

func TestFailAndHang(t *testing.T) {
	dir := t.TempDir()
	env := []string{"NMSTATECTL_STUB_STATE=" + filepath.Join(dir, "cp"), "NMSTATECTL_STUB_FAIL=commit"}
	if r := call(t, env, state, "apply", "--no-commit", "-"); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	if r := call(t, env, "", "commit"); r.code != 1 || !strings.Contains(r.stderr, "NmstateError") {
		t.Errorf("told to fail commit: %+v", r)
	}
	// A failed commit leaves the checkpoint for rollback.
	if r := call(t, env, "", "rollback"); r.code != 0 {
		t.Errorf("rollback after failed commit: %+v", r)
	}
	c := exec.Command(os.Args[0], "apply", "-")
	c.Env = append(os.Environ(), "NMSTATECTL_STUB_AS_MAIN=1", "NMSTATECTL_STUB_HANG=apply", "NMSTATECTL_STUB_STATE="+filepath.Join(dir, "cp2"))
	c.Stdin = strings.NewReader(state)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// The stand-in records the checkpoint just before it hangs (a plain
	// apply without --no-commit never does); wait for it, then kill.
	cp2 := filepath.Join(dir, "cp2")
	for i := 0; ; i++ {
		if _, err := os.Stat(cp2); err == nil {
			break
		}
		if i == 500 {
			c.Process.Kill()
			t.Fatal("hanging apply never reached its hang")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Process.Kill()
	err := c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Success() || ee.ExitCode() != -1 {
		t.Errorf("apply did not hang until killed: %v", err)
	}
}
