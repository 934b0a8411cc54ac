package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// call runs the stand-in with the test's environment plus env.
func call(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	return callEnv(t, standInEnv(env...), stdin, args...)
}

// callEnv runs the stand-in with exactly env.
func callEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = env
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

// TestCallLog: every call is logged, refused ones too.
func TestCallLog(t *testing.T) {
	dir := t.TempDir()
	env := []string{"NMSTATECTL_STUB_LOG=" + filepath.Join(dir, "log"), "NMSTATECTL_STUB_STATE=" + filepath.Join(dir, "cp"), "NMSTATECTL_STUB_INTERFACES=eth0"}
	calls := [][]string{{"version"}, {"--quiet", "version"}, {"apply", "--no-commit", "-"}, {"commit"}, {"rollback"}}
	for _, args := range calls {
		call(t, env, state, args...)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	if n := strings.Count(string(log), "\n"); n != len(calls) {
		t.Errorf("%d calls logged, want %d:\n%s", n, len(calls), log)
	}
	if !strings.Contains(string(log), `"stdin":"interfaces:`) {
		t.Errorf("apply's stdin not logged:\n%s", log)
	}
}

// TestDeclined: what no transcript shows is declined (70), not guessed.
func TestDeclined(t *testing.T) {
	for _, args := range [][]string{{"edit"}, {"--help"}, {"show", "--json"}, {"apply", "-k", "-"}} {
		r := call(t, nil, "", args...)
		if r.code != 70 || !strings.Contains(r.stderr, "stub: ") || !strings.Contains(r.stderr, "not modelled") {
			t.Errorf("%v: %+v, want exit 70 naming the stand-in", args, r)
		}
	}
	// Bad YAML is nmstate's refusal, exit 1.
	r := call(t, nil, "interfaces: [", "gc", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "NmstateError: InvalidArgument: Invalid YAML string") {
		t.Errorf("malformed yaml: %+v", r)
	}
}

func TestFailAndHang(t *testing.T) {
	dir := t.TempDir()
	env := []string{"NMSTATECTL_STUB_STATE=" + filepath.Join(dir, "cp"), "NMSTATECTL_STUB_FAIL=commit", "NMSTATECTL_STUB_INTERFACES=eth0"}
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
	c.Env = standInEnv("NMSTATECTL_STUB_HANG=apply", "NMSTATECTL_STUB_STATE="+filepath.Join(dir, "cp2"), "NMSTATECTL_STUB_INTERFACES=eth0")
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

// TestUnmodelledMachineHasTheKernelsInterfaces: without
// NMSTATECTL_STUB_INTERFACES the stand-in knows the interfaces the kernel
// of its network namespace has, as the real tool learns them from
// NetworkManager: a name the machine lacks is refused with transcript
// 12's text, never assumed to exist.
func TestUnmodelledMachineHasTheKernelsInterfaces(t *testing.T) {
	b, err := os.ReadFile("testdata/transcripts/12-apply-missing-interface/stdin")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/transcripts/12-apply-missing-interface/stderr")
	if err != nil {
		t.Fatal(err)
	}
	wantErr := strings.TrimSpace(string(want)[strings.Index(string(want), "NmstateError:"):])
	absent := "nrabsent0"
	if _, err := os.Stat(filepath.Join("/sys/class/net", absent)); err == nil {
		t.Fatalf("this machine has a link named %s; the test needs a name it lacks", absent)
	}
	stdin := strings.ReplaceAll(string(b), "eth9", absent)
	r := call(t, []string{"NMSTATECTL_STUB_STATE=" + filepath.Join(t.TempDir(), "cp")}, stdin, "apply", "--no-commit", "--timeout", "60", "-")
	if wantErr = strings.ReplaceAll(wantErr, "eth9", absent); r.code != 1 || !strings.Contains(r.stderr, wantErr) {
		t.Errorf("apply on an unmodelled machine: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, wantErr)
	}
}
