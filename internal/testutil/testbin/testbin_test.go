package testbin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
)

// The cache key follows the source a build reads and nothing else: an
// edit to a source file, a new file or a renamed one changes it; a test
// file, prose (.md, which nothing embeds), version control or bin/ does
// not.
func TestSourceKey(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		testutil.WriteFile(t, root, rel, text, 0o644)
	}
	key := func() string {
		t.Helper()
		k, err := sourceKey(root)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module example\n")
	write("a/a.go", "package a\n")
	first := key()
	for _, rel := range []string{"a/a_test.go", ".git/HEAD", "bin/agent", "tmp/x", "a/a.test", "docs/a.md", "README.md"} {
		write(rel, "anything")
		if k := key(); k != first {
			t.Errorf("writing %s changed the key", rel)
		}
	}
	write("a/a.go", "package a // edited\n")
	edited := key()
	if edited == first {
		t.Error("editing a/a.go left the key as it was")
	}
	write("a/b.txt", "embedded, perhaps")
	if key() == edited {
		t.Error("a new non-test file left the key as it was")
	}
	os.Rename(filepath.Join(root, "a/b.txt"), filepath.Join(root, "a/c.txt"))
	if key() == edited {
		t.Error("a renamed file gave an earlier key")
	}
}

// Two processes' worth of Path calls for the same binary build it once:
// the second finds the first's binary under the lock.
func TestBuildOnceReusesTheBinary(t *testing.T) {
	t.Setenv(EnvCache, t.TempDir())
	dir, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "nmstatectl")
	if err := buildOnce(out, "./tests/stubs/nmstatectl", nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := buildOnce(out, "./tests/stubs/nmstatectl", nil); err != nil {
		t.Fatal(err)
	}
	again, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi, again) || !fi.ModTime().Equal(again.ModTime()) {
		t.Error("the second buildOnce built the binary again")
	}
	if m, _ := filepath.Glob(out + ".tmp*"); len(m) != 0 {
		t.Errorf("temporary builds left behind: %v", m)
	}
}

// Two packages of one name are two binaries: the boot simulation's
// elemental stand-in and tests/stubs' are both "elemental", and a run that
// builds both must hand each test its own (one shared path gave the boot
// cases the other stand-in).
func TestSameNameOtherPackage(t *testing.T) {
	boot, stubs := Build(t, "./tests/boot/elemental"), Build(t, "./tests/stubs/elemental")
	if boot == stubs {
		t.Fatalf("both packages built at %s", boot)
	}
	if filepath.Base(boot) != "elemental" || filepath.Base(stubs) != "elemental" {
		t.Errorf("binaries %s and %s: want each named after its package", boot, stubs)
	}
	a, errA := os.ReadFile(boot)
	b, errB := os.ReadFile(stubs)
	if errA != nil || errB != nil || string(a) == string(b) {
		t.Errorf("the two builds are not two programs (%v, %v)", errA, errB)
	}
}
