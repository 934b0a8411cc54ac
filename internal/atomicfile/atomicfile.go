// Package atomicfile replaces files so that a reader, a crash or a power cut
// sees the old content or the new, never a mix and never a truncated file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempPrefix starts every temp name: a dot file whose name does not end in
// .yaml, so neither yip (which loads every *.yaml under /oem) nor a keyfile
// loader picks up a half-written file.
const TempPrefix = ".nodereg-tmp-"

// Write replaces path with data and mode perm: temp file in the same
// directory, fsync, rename, fsync of the directory. On error path is left as
// it was and the temp file is removed.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+filepath.Base(path)+"-*")
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
