package state

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
)

// A state file with every key, in the order an agent writes them
// (docs/cli.md, "State file": upstream's keys first, then nodereg's),
// written by hand.
const everyKey = `initialRegistration: 2026-06-09T10:11:12Z
emulatedTPM: true
emulatedTPMSeed: 7
nodereg-ak: AAEC
nodereg-network-digest: sha256:00
nodereg-network-state: applied
nodereg-network-addresses: eth0=10.0.0.5/24
nodereg-network-error: boom
nodereg-network-error-kind: apply-failed
nodereg-network-error-phase: apply
nodereg-network-error-interfaces: eth0
nodereg-network-drift-repaired: 'addresses: 10.0.0.5/24 missing on eth0'
nodereg-last-phase: finish
`

func TestSaveWritesTheKeysInOrder(t *testing.T) {
	st := &State{InitialRegistration: time.Date(2026, 6, 9, 10, 11, 12, 0, time.UTC), EmulatedTPM: true, EmulatedTPMSeed: 7, LastPhase: "finish"}
	st.SetAKBlob([]byte{0, 1, 2})
	st.Network = Network{
		NetworkDigest: "sha256:00", NetworkState: "applied", NetworkAddresses: "eth0=10.0.0.5/24",
		NetworkError: "boom", NetworkErrorKind: "apply-failed", NetworkErrorPhase: "apply", NetworkErrorInterfaces: "eth0",
		NetworkDrift: "addresses: 10.0.0.5/24 missing on eth0",
	}
	p := filepath.Join(t.TempDir(), "registration", "state.yaml")
	if err := st.Save(host.Root("/"), p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != everyKey {
		t.Errorf("state file:\n%s\nwant:\n%s", b, everyKey)
	}
	back, note, err := Load(host.Root("/"), p)
	if err != nil || note != "" || back.Network != st.Network || back.AK != st.AK || !back.Registered() {
		t.Errorf("read back %+v %q %v", back, note, err)
	}
}

func TestInspectKeepsACorruptFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.yaml")
	if _, err := Inspect(host.Root("/"), p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte("initialRegistration: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(host.Root("/"), p); err == nil {
		t.Error("a corrupt file inspected without error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "state.yaml" {
		t.Errorf("Inspect changed the directory: %v", entries)
	}
}

func TestLoadRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.yaml")
	if err := os.Symlink("/etc/hostname", p); err != nil {
		t.Fatal(err)
	}
	var notFile *NotAFileError
	if _, _, err := Load(host.Root("/"), p); !errors.As(err, &notFile) {
		t.Errorf("a symlink loaded: %v", err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("the symlink is gone: %v", err)
	}
}
