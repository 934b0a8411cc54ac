package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// A real go test run of a module with a passing, a skipping and a failing
// test, through the command built from this package.
func TestSkipsAndFailuresOfARealRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) { testutil.WriteFile(t, dir, name, body, 0o644) }
	write("go.mod", "module example.com/m\n\ngo 1.21\n")
	write("m_test.go", `package m

import "testing"

func TestPasses(t *testing.T) { t.Log("chatter of a passing test") }
func TestSkips(t *testing.T)  { t.Skip("needs swtpm") }
func TestFails(t *testing.T)  { t.Fatal("broken on purpose") }
func TestSub(t *testing.T) {
	t.Run("inner", func(t *testing.T) { t.Skipf("no %s here", "netns") })
}
`)
	bin := testbin.Build(t, "./tests/gotest")
	skips := filepath.Join(t.TempDir(), "skips.txt")
	for _, verbose := range []bool{false, true} {
		os.Remove(skips)
		args := []string{"-skips", skips, "--", "go", "test", "-count=1"}
		if verbose {
			args = append(args, "-v")
		}
		cmd := exec.Command(bin, append(args, "./...")...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
			t.Fatalf("verbose=%v: exit %v, want go test's 1 (a test fails)\n%s", verbose, err, out)
		}
		s := string(out)
		if !strings.Contains(s, "broken on purpose") || !strings.Contains(s, "FAIL\texample.com/m") {
			t.Errorf("verbose=%v: output lacks the failure:\n%s", verbose, s)
		}
		if strings.Contains(s, "chatter of a passing test") != verbose {
			t.Errorf("verbose=%v: passing test's log shown=%v\n%s", verbose, !verbose, s)
		}
		b, err := os.ReadFile(skips)
		if err != nil {
			t.Fatalf("verbose=%v: no skips file: %v", verbose, err)
		}
		got := string(b)
		for _, want := range []string{"example.com/m TestSkips: m_test.go:6: needs swtpm\n", "example.com/m TestSub/inner: m_test.go:9: no netns here\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("verbose=%v: skips file %q lacks %q", verbose, got, want)
			}
		}
		if strings.Count(got, "\n") != 2 {
			t.Errorf("verbose=%v: skips file has other lines: %q", verbose, got)
		}
	}
}
