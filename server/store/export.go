package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/atomicfile"
)

// Dump is the store as JSON: the former file format (version 1), with each
// inventory's hardware data inline. Export writes it; Open imports it, also
// from a file written by an older regserver, whose hardware data lived in
// files of their own beside it.
type Dump struct {
	Version     int                       `json:"version"`
	Inventories map[string]*DumpInventory `json:"inventories"`
	Claims      []*Claim                  `json:"claims"`
}

// DumpInventory is an inventory with its hardware data.
type DumpInventory struct {
	Inventory
	Hardware
}

// Export writes the state, hardware included, as indented JSON.
func (s *Store) Export(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := Dump{Version: jsonFormatVersion, Inventories: map[string]*DumpInventory{}, Claims: s.state.Claims}
	for h, inv := range s.state.Inventories {
		hw, err := s.state.Hardware(h)
		if err != nil {
			return err
		}
		d.Inventories[h] = &DumpInventory{Inventory: *inv, Hardware: hw}
	}
	if d.Claims == nil {
		d.Claims = []*Claim{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// ExportFile writes the state of the database at path as Export does,
// reading it without the writer's lock (it fails while a regserver holds
// the file). A damaged file is exported as far as it reads: every record
// that cannot be read or decoded is left out and named in problems, and
// err is nil as long as the file opens at all.
func ExportFile(path string, w io.Writer) (problems []string, err error) {
	kind, _, err := sniff(path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	switch kind {
	case "missing":
		return nil, fmt.Errorf("store %s: %w", path, fs.ErrNotExist)
	case "json":
		return nil, fmt.Errorf("store %s: a JSON store of an older regserver; it is imported when regserver starts on it", path)
	}
	// A bucket whose pages are damaged is left out whole: walking it
	// could end the process (checkFile).
	damaged, err := checkFile(path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	back, err := openBolt(path, true)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	defer back.close()
	d, problems := salvage(back, damaged)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return problems, enc.Encode(d)
}

// salvage reads what it can, record by record, leaving out the buckets
// damaged names (their pages cannot be walked).
func salvage(back backend, damaged map[string]error) (*Dump, []string) {
	d := &Dump{Version: jsonFormatVersion, Inventories: map[string]*DumpInventory{}, Claims: []*Claim{}}
	var problems []string
	note := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	forEach := func(bucket []byte, fn func(k, v []byte) error) error {
		if err := damaged[string(bucket)]; err != nil {
			return err
		}
		return back.forEach(bucket, fn)
	}
	err := forEach(bucketInventories, func(k, v []byte) error {
		var inv Inventory
		if err := json.Unmarshal(v, &inv); err != nil || inv.Hash != string(k) {
			note("inventory %q: does not decode (%v)", k, err)
			return nil
		}
		d.Inventories[inv.Hash] = &DumpInventory{Inventory: inv}
		return nil
	})
	if err != nil {
		note("inventories after the %d read: %v", len(d.Inventories), err)
	}
	err = forEach(bucketClaims, func(k, v []byte) error {
		c := &Claim{}
		if err := json.Unmarshal(v, c); err != nil || len(k) != 8 {
			note("claim %x: does not decode (%v)", k, err)
			return nil
		}
		d.Claims = append(d.Claims, c)
		return nil
	})
	if err != nil {
		note("claims after the %d read: %v", len(d.Claims), err)
	}
	for h, di := range d.Inventories {
		if err := damaged[string(bucketHardware)]; err != nil {
			note("hardware: %v", err)
			break
		}
		b, err := back.get(bucketHardware, []byte(h))
		if err == nil && b != nil {
			err = json.Unmarshal(b, &di.Hardware)
		}
		if err != nil {
			note("hardware of %s: %v", h, err)
		}
	}
	slices.Sort(problems)
	return d, problems
}

// importIfJSON turns a JSON store at path into a database at the same path.
// Every step leaves either the JSON file or the complete database at path,
// so a crash during the import repeats it at the next start.
func importIfJSON(path string) (aside string, err error) {
	kind, data, err := sniff(path)
	if err != nil || kind != "json" {
		return "", err
	}
	var d Dump
	if err := json.Unmarshal(data, &d); err != nil {
		return "", fmt.Errorf("importing JSON store: %w", err)
	}
	if d.Version != jsonFormatVersion {
		return "", fmt.Errorf("importing JSON store: format version %d, this server imports %d", d.Version, jsonFormatVersion)
	}
	hwDir := path + ".hw"
	tmp := path + ".importing"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	back, err := openBolt(tmp, false)
	if err != nil {
		return "", fmt.Errorf("importing JSON store: %w", err)
	}
	st, err := load(back)
	if err == nil {
		err = fill(st, &d, hwDir)
	}
	if err == nil {
		err = st.commit()
	}
	if cerr := back.close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("importing JSON store: %w", err)
	}
	// The JSON file is kept under a second name, then the database takes
	// its place in one rename.
	aside = path + ".imported.json"
	if err := os.Remove(aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.Link(path, aside); err != nil {
		return "", fmt.Errorf("keeping the JSON store as %s: %w", aside, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("replacing the JSON store: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	if _, err := os.Stat(hwDir); err == nil {
		if err := os.Rename(hwDir, path+".imported.hw"); err != nil {
			return "", fmt.Errorf("moving %s aside: %w", hwDir, err)
		}
	}
	return aside, nil
}

// fill records a dump's content in an empty state.
func fill(st *State, d *Dump, hwDir string) error {
	for h, di := range d.Inventories {
		if di == nil || di.Hash != h || strings.ContainsAny(h, `/\`) {
			return fmt.Errorf("inventory under key %q: hash mismatch", h)
		}
		inv := di.Inventory
		st.PutInventory(&inv)
		hw := di.Hardware
		if hw.SMBIOS == nil && hw.SystemData == nil {
			b, err := os.ReadFile(filepath.Join(hwDir, h+".json"))
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return err
			default:
				if err := json.Unmarshal(b, &hw); err != nil {
					return fmt.Errorf("hardware of %s: %w", h, err)
				}
			}
		}
		if _, err := st.SetHardware(h, hw.SMBIOS, hw.SystemData, 0); err != nil {
			return err
		}
	}
	for _, c := range d.Claims {
		if c == nil {
			return errors.New("null claim")
		}
		st.AddClaim(c)
	}
	return nil
}
