package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func addInventory(s *Store, hash, name string) error {
	return s.Update(func(st *State) (bool, error) {
		st.Inventories[hash] = &Inventory{Name: name, Hash: hash}
		st.Claims = append(st.Claims, &Claim{Name: name + "-ip", Inventory: hash, IPName: "ip", Pool: "p", Address: "10.0.0." + name})
		return true, nil
	})
}

func TestReopenKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := addInventory(s, "h1", "1"); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s2.View(func(st *State) {
		if st.Inventories["h1"] == nil || len(st.Claims) != 1 || st.Claims[0].Address != "10.0.0.1" {
			t.Fatalf("reopened state lost data: %+v", st)
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

func TestUnchangedUpdateDoesNotWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, _ := Open(path)
	if err := s.Update(func(*State) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file written without a change: %v", err)
	}
}

func TestFailedWriteRollsBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := addInventory(s, "h1", "1"); err != nil {
		t.Fatal(err)
	}
	// A non-empty directory where the file goes makes the rename fail,
	// even for root.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = addInventory(s, "h2", "2")
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want an error naming %s", err, path)
	}
	s.View(func(st *State) {
		if st.Inventories["h2"] != nil || len(st.Claims) != 1 {
			t.Fatalf("failed update stayed in memory: %d inventories, %d claims", len(st.Inventories), len(st.Claims))
		}
	})
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("leftovers after failed write: %v", entries)
	}
}

func TestFnErrorRollsBack(t *testing.T) {
	s, _ := Open("")
	_ = addInventory(s, "h1", "1")
	boom := errors.New("boom")
	err := s.Update(func(st *State) (bool, error) {
		delete(st.Inventories, "h1")
		return true, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	s.View(func(st *State) {
		if st.Inventories["h1"] == nil {
			t.Fatal("mutation of a failed update was kept")
		}
	})
}

// A reader polling the file while many updates land must only ever see
// complete documents: the property atomic replacement exists for.
func TestReadersNeverSeePartialFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	s, _ := Open(path)
	if err := addInventory(s, "h0", "0"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad []string
	var reads int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			reads++
			var st State
			if err := json.Unmarshal(b, &st); err != nil {
				bad = append(bad, fmt.Sprintf("%d bytes: %v", len(b), err))
			}
		}
	}()
	// Large enough that a plain write would take several write calls.
	for i := 1; i <= 50; i++ {
		pad := strings.Repeat(fmt.Sprint(i%10), 256<<10)
		err := s.Update(func(st *State) (bool, error) {
			st.Inventories["h0"].Labels = map[string]string{"pad": pad}
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d of %d reads saw a partial or missing file, first: %s", len(bad), reads+len(bad), bad[0])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

func TestOpenRejectsCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"inventories":{`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "decoding") {
		t.Fatalf("err = %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"version":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "format version 99") {
		t.Fatalf("err = %v", err)
	}
}

func BenchmarkUpdate200Inventories(b *testing.B) {
	s, _ := Open(filepath.Join(b.TempDir(), "state.json"))
	for i := 0; i < 200; i++ {
		_ = addInventory(s, fmt.Sprint("h", i), fmt.Sprint(i))
	}
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Update(func(st *State) (bool, error) {
			st.Inventories["h0"].UpdatedAt = now.Add(time.Duration(i))
			return true, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// Hardware data lives in one file per machine, survives a reopen, stays out
// of the main file every change rewrites, and goes with its inventory.
func TestHardwareFilesBesideTheMainFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	smbios := map[string]any{"System Information": map[string]any{"UUID": "u-1"}}
	err = s.Update(func(st *State) (bool, error) {
		inv := &Inventory{Name: "m-1", Hash: "ab12"}
		st.Inventories[inv.Hash] = inv
		st.SetHardware(inv, smbios, map[string]any{"Runtime": map[string]any{"Hostname": "n1"}})
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	main, _ := os.ReadFile(path)
	if strings.Contains(string(main), "u-1") || strings.Contains(string(main), "Hostname") {
		t.Errorf("hardware data in the main file: %s", main)
	}
	hw, err := os.ReadFile(filepath.Join(path+".hw", "ab12.json"))
	if err != nil || !strings.Contains(string(hw), "u-1") {
		t.Fatalf("hardware file: %q %v", hw, err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s2.View(func(st *State) {
		inv := st.Inventories["ab12"]
		if inv == nil || inv.SMBIOS["System Information"].(map[string]any)["UUID"] != "u-1" || inv.SystemData["Runtime"] == nil {
			t.Errorf("after reopen: %+v", inv)
		}
	})
	if err := s2.Update(func(st *State) (bool, error) { st.DeleteInventory("ab12"); return true, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path+".hw", "ab12.json")); !os.IsNotExist(err) {
		t.Errorf("hardware file outlives its inventory: %v", err)
	}
}
