package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tests/stages.sh with real make and go on a scratch module (a copy of the
// script and of this command, a package with a skipping test, a Makefile
// with a passing and a failing target): it runs both stages of a group,
// fails, and ends with the skip list; --skips prints it again; a second
// run does not show the first run's skips.
func TestStagesPrintsTheSkips(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(self), "..", "..")
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string, mode os.FileMode) {
		b, err := os.ReadFile(filepath.Join(repo, from))
		if err != nil {
			t.Fatal(err)
		}
		write(to, string(b), mode)
	}
	copyFile("tests/stages.sh", "tests/stages.sh", 0o755)
	copyFile("tests/gotest/main.go", "tests/gotest/main.go", 0o644)
	write("go.mod", "module example.com/m\n\ngo 1.21\n", 0o644)
	write("pkg/p_test.go", "package p\n\nimport \"testing\"\n\nfunc TestRuns(t *testing.T) {}\nfunc TestSkips(t *testing.T) { t.Skip(\"needs a thing\") }\n", 0o644)
	write("Makefile", "GO ?= go\nGOTEST ?= $(GOTEST_WRAP) $(GO) test -count=1\nok:\n\t$(GOTEST) ./pkg/...\nbad:\n\t@echo broken; exit 3\nnone:\n\t@true\n", 0o644)

	run := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(dir, "tests", "stages.sh"), args...)
		cmd.Env = append(os.Environ(), "MAKE=make")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("ok+bad")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (stage bad failed)\n%s", code, out)
	}
	for _, want := range []string{"=== stage ok:", "=== stage bad:", "broken", "FAIL (exit 2)", "=== make test: 1 skipped tests, with their reasons",
		"  [ok] example.com/m/pkg TestSkips: p_test.go:6: needs a thing\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "  [ok] example.com/m/pkg TestSkips: p_test.go:6: needs a thing\n") {
		t.Errorf("the skip list is not the end of the output:\n%s", out)
	}
	again, code := run("--skips")
	if code != 0 || !strings.Contains(out, again) {
		t.Errorf("--skips: exit %d, %q is not the list printed at the end of the run", code, again)
	}
	out, code = run("none")
	if code != 0 || !strings.HasSuffix(out, "=== make test: no test skipped\n") {
		t.Errorf("a run without go test: exit %d, want no stale skips:\n%s", code, out)
	}
}
