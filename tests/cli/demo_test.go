package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// `make demo` piped (CI, a log file) is plain text: no colour codes, the
// 2 KB AK blob of the state file cut to its start and length, and each
// machine's identity named (the TPM hash, the MAC for auth mac).
func TestDemoPipedIsPlainAndShort(t *testing.T) {
	// Parallel, beside the auth-kind test's 2 s deadline: the demo's
	// servers, swtpm and work directory are its own.
	t.Parallel()
	if _, err := exec.LookPath("swtpm"); err != nil {
		t.Skip("swtpm not found: install the Debian packages swtpm and swtpm-tools to run the demo")
	}
	cmd := exec.Command("./tests/demo.sh")
	cmd.Dir = testbin.ModuleRoot()
	cmd.Env = append(os.Environ(), "AGENT="+testbin.Build(t, "./cmd/agent"), "REGSERVER="+testbin.Build(t, "./cmd/regserver"), "NO_COLOR=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	if strings.Contains(s, "\x1b[") {
		t.Errorf("piped demo output holds terminal escape codes:\n%q", s)
	}
	for _, line := range strings.Split(s, "\n") {
		if len(line) > 600 {
			t.Errorf("a line of %d characters: %.120s...", len(line), line)
		}
	}
	for _, want := range []string{"nodereg-ak: ", "characters, shortened by the demo)", `msg="TPM identity"`, `msg="PLAIN identity"`, "== machine 2: auth mac"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
}
