//go:build !crashrec

package host

import (
	"os"
	"path/filepath"
	"testing"
)

// The agent's own builds record nothing, whatever the environment: the
// crash tests' recorder exists only in the crashrec build.
func TestDefaultBuildRecordsNoOperations(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "ops.jsonl")
	t.Setenv("NODEREG_CRASHREC_LOG", log)
	r := Root(filepath.Join(dir, "root"))
	if err := r.MkdirAll("/oem", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("/oem/f", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove("/oem/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Errorf("the default build wrote %s (%v)", log, err)
	}
}
