// Package vectors gives tests the wire captures from elemental-operator
// (tests/vectors, a copy of the shared vectors) as golden inputs.
package vectors

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// ModuleRoot is the repository root.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Dir is the repository's copy of the captures.
func Dir() string {
	repo := ModuleRoot()
	return filepath.Join(repo, "tests", "vectors")
}

// Read returns one capture; a missing file fails the test (they are part of
// the repository).
func Read(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		tb.Fatalf("golden vector %s: %v", name, err)
	}
	return b
}
