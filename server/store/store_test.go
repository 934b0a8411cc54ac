package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/protocol"
)

func addInventory(s *Store, hash, name string) error {
	return s.Update(func(st *State) (bool, error) {
		st.PutInventory(&Inventory{Name: name, Hash: hash})
		st.AddClaim(&Claim{Name: name + "-ip", Inventory: hash, IPName: "ip", Pool: "p", Address: "10.0.0." + name})
		return true, nil
	})
}

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestReopenKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	for i := 1; i <= 3; i++ {
		if err := addInventory(s, fmt.Sprint("h", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Claims keep their creation order across a removal and a reopen.
	if err := s.Update(func(st *State) (bool, error) { st.DeleteInventory("h2"); return true, nil }); err != nil {
		t.Fatal(err)
	}
	if err := addInventory(s, "h4", "4"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, path)
	s2.View(func(st *State) {
		var order []string
		for _, c := range st.Claims {
			order = append(order, c.Address)
		}
		if len(st.Inventories) != 3 || st.Inventories["h2"] != nil || strings.Join(order, ",") != "10.0.0.1,10.0.0.3,10.0.0.4" {
			t.Fatalf("reopened: %d inventories, claims %v", len(st.Inventories), order)
		}
	})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600 (the file holds machine data)", fi.Mode().Perm())
	}
}

func TestSecondOpenIsRefusedWhileLocked(t *testing.T) {
	// The refusal is what is tested, not the length of the wait before it.
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "state.db")
	open(t, path)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second open: %v", err)
	}
}

func TestFnErrorBeforeChangesKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	if err := addInventory(s, "h1", "1"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Update(func(st *State) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	// Recorded changes are committed even when fn then fails: memory and
	// disk never part.
	err := s.Update(func(st *State) (bool, error) {
		st.AddClaim(&Claim{Name: "x", Inventory: "h1", Address: "10.0.0.9"})
		return true, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	s.Close()
	s = open(t, path)
	s.View(func(st *State) {
		if len(st.Claims) != 2 {
			t.Fatalf("%d claims on disk, want 2", len(st.Claims))
		}
	})
}

// Concurrent Updates share transactions, and each returns only once its
// change is on disk, in the order they ran.
func TestConcurrentUpdatesCommitInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	const n = 300
	for _, err := range testutil.Concurrently(n, func(i int) error {
		return addInventory(s, fmt.Sprint("h", i), fmt.Sprint(i))
	}) {
		t.Fatal(err)
	}
	var inMemory []string
	s.View(func(st *State) {
		for _, c := range st.Claims {
			inMemory = append(inMemory, c.Name)
		}
	})
	s.Close()
	s = open(t, path)
	var onDisk []string
	s.View(func(st *State) {
		for _, c := range st.Claims {
			onDisk = append(onDisk, c.Name)
		}
	})
	if len(onDisk) != n || strings.Join(onDisk, ",") != strings.Join(inMemory, ",") {
		t.Fatalf("on disk %d claims, order equal to memory: %v", len(onDisk), strings.Join(onDisk, ",") == strings.Join(inMemory, ","))
	}
}

// A change that cannot be committed leaves memory as the database is.
func TestFailedCommitRollsBack(t *testing.T) {
	for _, path := range []string{"", filepath.Join(t.TempDir(), "state.db")} {
		s := open(t, path)
		if err := addInventory(s, "h1", "1"); err != nil {
			t.Fatal(err)
		}
		err := s.Update(func(st *State) (bool, error) {
			st.AddClaim(&Claim{Name: "y", Inventory: "h1", Address: "10.0.0.8"})
			// A value JSON cannot encode fails the transaction.
			st.PutInventory(&Inventory{Name: "bad", Hash: "h9", Network: &NetworkTemplate{
				Config: map[string]protocol.RawValue{"x": {Value: make(chan int)}}}})
			return true, nil
		})
		if err == nil {
			t.Fatalf("%q: unencodable inventory committed", path)
		}
		s.View(func(st *State) {
			if st.Inventories["h9"] != nil || len(st.Claims) != 1 {
				t.Fatalf("%q: failed commit left %d claims, h9 %v", path, len(st.Claims), st.Inventories["h9"])
			}
		})
		// And the store still works.
		if err := addInventory(s, "h2", "2"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRefusesEmptyNullAndCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"empty": "", "null": "null\n", "blank": "  \n", "garbage": "\x00\x01not a database at all, not even JSON"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want a refusal naming the file", name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("%s: refused file was changed", name)
		}
	}
}

// Hardware data is stored per inventory, read back from the database when
// asked for, merged when only one kind is sent, capped, and deleted with
// its inventory.
func TestHardware(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	smbios := map[string]any{"System Information": map[string]any{"UUID": "u-1"}}
	err := s.Update(func(st *State) (bool, error) {
		st.PutInventory(&Inventory{Name: "m-1", Hash: "ab12"})
		_, err := st.SetHardware("ab12", smbios, map[string]any{"Runtime": map[string]any{"Hostname": "n1"}}, 0)
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Only system data sent: the SMBIOS stays.
	err = s.Update(func(st *State) (bool, error) {
		_, err := st.SetHardware("ab12", nil, map[string]any{"Runtime": map[string]any{"Hostname": "n2"}}, 0)
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path)
	hw, err := s.Hardware("ab12")
	if err != nil || hw.SMBIOS["System Information"].(map[string]any)["UUID"] != "u-1" || hw.SystemData["Runtime"].(map[string]any)["Hostname"] != "n2" {
		t.Fatalf("after reopen: %+v, %v", hw, err)
	}
	big := map[string]any{"x": strings.Repeat("a", 2000)}
	err = s.Update(func(st *State) (bool, error) {
		_, err := st.SetHardware("ab12", big, nil, 1024)
		return true, err
	})
	if err == nil || !strings.Contains(err.Error(), "more than the 1024 allowed") {
		t.Fatalf("oversized hardware: %v", err)
	}
	if hw, _ := s.Hardware("ab12"); hw.SMBIOS["x"] != nil {
		t.Fatal("refused hardware data was stored")
	}
	if err := s.Update(func(st *State) (bool, error) { st.DeleteInventory("ab12"); return true, nil }); err != nil {
		t.Fatal(err)
	}
	if hw, _ := s.Hardware("ab12"); hw.SMBIOS != nil || hw.SystemData != nil {
		t.Errorf("hardware outlives its inventory: %+v", hw)
	}
}

// legacyJSON is a store written by the former JSON format: hardware in
// files beside it.
const legacyJSON = `{"version":1,"inventories":{"h1":{"name":"m-1","hash":"h1","authKind":"plain","registration":"demo","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"},"h2":{"name":"m-2","hash":"h2","authKind":"plain","registration":"demo","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}},"claims":[{"name":"m-2-ip","inventory":"h2","ipName":"ip","pool":"p","createdAt":"2026-01-01T00:00:00Z","notBefore":"2026-01-01T00:00:00Z","address":"10.0.0.11","prefix":24},{"name":"m-1-ip","inventory":"h1","ipName":"ip","pool":"p","createdAt":"2026-01-01T00:00:01Z","notBefore":"2026-01-01T00:00:01Z","address":"10.0.0.10","prefix":24}]}
`

func TestImportsJSONStoreOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store.json")
	if err := os.WriteFile(path, []byte(legacyJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(path+".hw", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path+".hw", "h1.json"), []byte(`{"smbios":{"System Information":{"UUID":"u-1"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Imported != path+".imported.json" {
		t.Fatalf("Imported = %q", s.Imported)
	}
	check := func(s *Store) {
		t.Helper()
		s.View(func(st *State) {
			if len(st.Inventories) != 2 || len(st.Claims) != 2 || st.Claims[0].Name != "m-2-ip" || st.Claims[1].Address != "10.0.0.10" {
				t.Fatalf("imported state: %d inventories, claims %+v", len(st.Inventories), st.Claims)
			}
		})
		if hw, err := s.Hardware("h1"); err != nil || hw.SMBIOS["System Information"] == nil {
			t.Fatalf("imported hardware: %+v %v", hw, err)
		}
	}
	check(s)
	s.Close()
	if b, err := os.ReadFile(path + ".imported.json"); err != nil || string(b) != legacyJSON {
		t.Fatalf("JSON store not kept aside unchanged: %v", err)
	}
	if _, err := os.Stat(path + ".imported.hw/h1.json"); err != nil {
		t.Fatalf("hardware directory not moved aside: %v", err)
	}
	if b, _ := os.ReadFile(path); bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		t.Fatal("the store path still holds JSON")
	}
	// Once: the next start opens the database.
	s = open(t, path)
	if s.Imported != "" {
		t.Fatalf("imported twice: %q", s.Imported)
	}
	check(s)
}

// Export prints the state with hardware as JSON, and that JSON is what an
// import reads: a backup restores by starting on it.
func TestExportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "a.db"))
	if err := addInventory(s, "h1", "1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(st *State) (bool, error) {
		_, err := st.SetHardware("h1", map[string]any{"BIOS Information": map[string]any{"Vendor": "SeaBIOS"}}, nil, 0)
		return true, err
	}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := s.Export(&out); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, out.Bytes())
	}
	if !strings.Contains(out.String(), `"Vendor": "SeaBIOS"`) || !strings.Contains(out.String(), `"address": "10.0.0.1"`) {
		t.Fatalf("export lacks hardware or claims:\n%s", out.String())
	}
	restored := filepath.Join(dir, "restored.db")
	if err := os.WriteFile(restored, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := open(t, restored)
	var again bytes.Buffer
	if err := r.Export(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != out.String() {
		t.Fatalf("restored export differs:\n%s\n---\n%s", out.String(), again.String())
	}
}

func BenchmarkUpdate1000Inventories(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "state.db"))
	for i := 0; i < 1000; i++ {
		_ = addInventory(s, fmt.Sprint("h", i), fmt.Sprint(i))
	}
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Update(func(st *State) (bool, error) {
			inv := st.Inventories["h0"]
			inv.UpdatedAt = now.Add(time.Duration(i))
			st.PutInventory(inv)
			return true, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// A JSON store longer than the head sniff reads (blank lines first, a long
// value after) is still imported whole; a database is told from its head.
func TestSniffReadsAJSONStoreWhole(t *testing.T) {
	dir := t.TempDir()
	long := strings.Replace(legacyJSON, `"registration":"demo"`, `"registration":"`+strings.Repeat("r", 2*sniffHead)+`"`, 1)
	for name, text := range map[string]string{"blank head": strings.Repeat(" \n", sniffHead) + legacyJSON, "long value": long} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.View(func(st *State) {
			if len(st.Inventories) != 2 {
				t.Errorf("%s: %d inventories imported, want 2", name, len(st.Inventories))
			}
		})
		s.Close()
	}
}
