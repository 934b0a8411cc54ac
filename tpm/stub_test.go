//go:build !(emulatedtpm && cgo)

package tpm

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestEmulationNotBuilt(t *testing.T) {
	if EmulationAvailable {
		t.Fatal("EmulationAvailable in a build without the emulatedtpm tag")
	}
	_, err := Open(Options{Emulate: true, Seed: 1})
	if !errors.Is(err, ErrEmulationNotBuilt) {
		t.Fatalf("Open(emulated): %v, want ErrEmulationNotBuilt", err)
	}
	for _, want := range []string{"make build-emulated", "-tags emulatedtpm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// The default build must not link the cgo simulator.
func TestDefaultBuildIsCgoFree(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	cmd := exec.Command(gobin, "list", "-deps", ".", "./wire")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "go-tpm-tools") {
		t.Errorf("default build depends on go-tpm-tools:\n%s", out)
	}
	if !strings.Contains(string(out), "github.com/google/go-tpm/tpm2") {
		t.Errorf("go list output looks wrong:\n%s", out)
	}
}
