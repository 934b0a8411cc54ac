package hostile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// runBinary runs the real agent on m with env added; it returns the exit
// status, stdout and the last line of stderr (the final line).
func runBinary(t *testing.T, bin string, env []string, args ...string) (code int, stdout, final string) {
	t.Helper()
	code, stdout, final, _ = runBinaryAll(t, bin, env, args...)
	return code, stdout, final
}

// runBinaryAll is runBinary that also returns the whole of stderr.
func runBinaryAll(t *testing.T, bin string, env []string, args ...string) (code int, stdout, final, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	code, stdout, stderr = testutil.Run(t, cmd)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	t.Logf("exit %d\n%s", code, stderr)
	return code, stdout, lines[len(lines)-1], stderr
}

func wantFinal(t *testing.T, code, wantCode int, final string, words ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit %d, want %d; final line %s", code, wantCode, final)
	}
	for _, w := range words {
		if !strings.Contains(final, w) {
			t.Errorf("final line %s lacks %q", final, w)
		}
	}
}

// TestDryRunExitsAsTheRealRun: with --nmstate nmstatectl
// and no nmstatectl, the real run ends at plan with 78; so do --dry-run and
// render, still printing what they can.
func TestDryRunExitsAsTheRealRun(t *testing.T) {
	bin := testbin.Build(t, "./cmd/agent")
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok")
	noTool := []string{host.EnvNmstatectl + "=/nonexistent/nmstatectl"}
	for _, dry := range []bool{false, true} {
		m := node.New(t, "52:54:00:15:00:08", url, "    network-config: explicit\n")
		args := []string{"--root", m.Root, "--nmstate", "nmstatectl", "--deadline", "5s", "--network-timeout", "5s"}
		if dry {
			args = append(args, "--dry-run")
		}
		code, stdout, final := runBinary(t, bin, noTool, args...)
		wantFinal(t, code, 78, final, "registered, then plan failed: needs a person", "phase=plan")
		if dry && !strings.Contains(stdout, "# keyfiles and applicator not shown: plan network (nmstate): required tool nmstatectl not found") {
			t.Errorf("the dry run does not say why it shows no keyfiles:\n%s", stdout)
		}
	}
	nc := filepath.Join(t.TempDir(), "nc.json")
	testutil.Must(t, os.WriteFile(nc, []byte(strings.Replace(seedPRNetwork, `{"ipAddresses"`, `{"configurator":"nmstate","ipAddresses"`, 1)), 0o600))
	code, _, final := runBinary(t, bin, noTool, "render", "--network-config", nc, "--nmstate", "nmstatectl")
	wantFinal(t, code, 78, final, "render:", "required tool nmstatectl not found")
}

// TestFinalLineSaysRegistered: a run the server registered
// whose plan is refused says so: registered, then which phase failed. A
// --reset without the elemental toolkit ends at config, before it talks to
// the server.
func TestFinalLineSaysRegistered(t *testing.T) {
	bin := testbin.Build(t, "./cmd/agent")
	a := nmstateAttacks[0] // hostname
	a.configurator = "nmstate"
	m := node.New(t, "52:54:00:15:00:09", policyServer(t, a), "    nmstate: builtin\n")
	code, _, final := runBinary(t, bin, nil, "--root", m.Root, "--deadline", "5s", "--network-timeout", "5s")
	wantFinal(t, code, 78, final, "registered, then plan failed: needs a person", "phase=plan", "exit=78")
	if strings.Contains(final, "not registered") {
		t.Errorf("final line denies the registration: %s", final)
	}

	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok")
	m = node.New(t, "52:54:00:15:00:0a", url, "")
	code, _, final, stderr := runBinaryAll(t, bin, []string{host.EnvElemental + "=/nonexistent/elemental"}, "--root", m.Root, "--reset", "--deadline", "5s")
	wantFinal(t, code, 78, final, "not registered: needs a person", "phase=config")
	if !strings.Contains(stderr, "reset needs the elemental toolkit") {
		t.Errorf("the run does not say that the toolkit is missing:\n%s", stderr)
	}
	if s.Hits() != 0 {
		t.Errorf("--reset without the toolkit talked to the server %d times", s.Hits())
	}
}
