package state

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
)

// FuzzLoad: whatever is on disk (a half-written file from another
// tool, bit rot), Load never fails on content. Either the state is
// read and survives a save/load round trip, or the file is kept aside
// byte for byte and the run starts fresh.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("initialRegistration: 2026-06-09T10:11:12.123456789Z\nemulatedTPM: true\nemulatedTPMSeed: -1\n"))
	f.Add([]byte("initialRegistration: \"2026-06-09T10:11:12Z\"\nnodereg-ak: AAEC\nnodereg-network-digest: sha256:00\nnodereg-last-phase: finish\n"))
	f.Add([]byte("initialRegistration: 0001-01-01T00:00:00Z\n"))
	f.Add([]byte(""))
	f.Add([]byte("emulatedTPMSeed: 99999999999999999999\n"))
	f.Add([]byte("initialRegistration: [\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "state.yaml")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		st, note, err := Load(host.Root("/"), path)
		if err != nil {
			t.Fatalf("Load failed on content alone: %v", err)
		}
		if st == nil {
			t.Fatal("nil state without error")
		}
		if strings.Contains(note, "corrupt") {
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("corrupt state file still in place (%v)", err)
			}
			asides, _ := filepath.Glob(path + ".corrupt-*")
			if len(asides) != 1 {
				t.Fatalf("want one kept-aside file, got %v", asides)
			}
			kept, err := os.ReadFile(asides[0])
			if err != nil || !bytes.Equal(kept, content) {
				t.Fatalf("kept-aside file differs from the corrupt one (%v)", err)
			}
			if st.Registered() {
				t.Fatal("a corrupt state counts as registered")
			}
			return
		}
		if err := st.Save(host.Root("/"), path); err != nil {
			t.Fatalf("saving a state we read: %v", err)
		}
		again, note, err := Load(host.Root("/"), path)
		if err != nil || note != "" {
			t.Fatalf("reading back our own state: %v %q", err, note)
		}
		if !again.InitialRegistration.Equal(st.InitialRegistration) || again.EmulatedTPM != st.EmulatedTPM ||
			again.EmulatedTPMSeed != st.EmulatedTPMSeed || again.AK != st.AK ||
			again.NetworkDigest != st.NetworkDigest || again.LastPhase != st.LastPhase {
			t.Fatalf("state changed over save and load: %+v -> %+v", st, again)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("save left extra files: %v", entries)
		}
	})
}
