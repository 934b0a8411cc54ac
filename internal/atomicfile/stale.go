package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// IsTemp says whether name is one of Write's temp files: TempPattern with
// the random digits os.CreateTemp puts in place of the star.
func IsTemp(name string) bool {
	prefix, suffix, _ := strings.Cut(TempPattern, "*")
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, suffix)
	if !ok || mid == "" {
		return false
	}
	return strings.Trim(mid, "0123456789") == ""
}

// RemoveStale removes the temp files a killed Write left in dir (regular
// files only; a missing dir has none) and returns their paths. The caller
// must be the only writer of dir, else it would take another's file in
// flight: the agent calls it holding the state lock.
func RemoveStale(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		if err := SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
