// Package atomicfile replaces files so that a reader, a crash or a power cut
// sees the old content or the new, never a mix and never a truncated file.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TempPattern names temp files: hidden and ending in .tmp, so neither yip
// (which loads every *.yaml and *.yml under /oem) nor NetworkManager (which
// ignores hidden files) ever loads a half-written file.
const TempPattern = ".nodereg-*.tmp"

// Write replaces path with data and mode perm: temp file in the same
// directory, fsync, rename, fsync of the directory. On error path is left as
// it was and the temp file is removed.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPattern)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a rename or removal in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Remove removes path if it exists and makes the removal durable.
func Remove(path string) error {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// MkdirAll creates dir and its missing parents with perm, and syncs the
// parent of each directory it created: a file written into a new directory
// is only durable with the directory's own entry, and a later write in
// another directory must not reach the disk while this one does not
// (docs/apply.md, "Crash consistency").
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := SyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("creating %s: %w", missing[i], err)
		}
	}
	return nil
}
