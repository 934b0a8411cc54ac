package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// semver is semver.org's grammar, loosely: MAJOR.MINOR.PATCH, then an
// optional pre-release and build metadata.
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// The Makefile's VERSION (what -ldflags gives `agent version`) is a
// semantic version naming the commit: before any tag, after a v-tag, and
// with local changes. Run on a scratch repository holding the Makefile.
func TestMakeVersionIsSemanticWithTheCommit(t *testing.T) {
	for _, tool := range []string{"git", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install the Debian package %q", tool, tool)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), mk, 0o600); err != nil {
		t.Fatal(err)
	}
	sh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "MAKEFLAGS=", "MAKELEVEL=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh("git", "init", "-q")
	sh("git", "add", "Makefile")
	sh("git", "commit", "-qm", "one")
	commit := sh("git", "rev-parse", "--short=7", "HEAD")
	sh("git", "tag", "not-a-version") // only v-tags count
	check := func(want string) {
		t.Helper()
		got := sh("make", "-s", "version")
		if got != want || !semver.MatchString(got) {
			t.Errorf("make version = %q, want %q (a semantic version)", got, want)
		}
	}
	check("0.1.0-dev+g" + commit)
	sh("git", "tag", "v1.2.3")
	check("1.2.3-0-g" + commit)
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), append(mk, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	check("1.2.3-0-g" + commit + "-dirty")
	sh("git", "tag", "-d", "v1.2.3")
	check("0.1.0-dev+g" + commit + ".dirty")
}
