package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tempPattern names temporary files: hidden and ending in .tmp, so neither
// yip (loads *.yaml, *.yml) nor NetworkManager (*.nmconnection and plain
// names, but ignores hidden files) ever loads a half-written file.
const tempPattern = ".nodereg-*.tmp"

// writeFileAtomic replaces path with data: temp file in the same directory,
// fsync, chmod, rename, fsync of the directory.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		if err = f.Chmod(perm); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// removeFile removes path if present and syncs its directory.
func removeFile(path string) error {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// snapshot is the content (or absence) of files, so a failed change can put
// them back byte for byte.
type snapshot map[string][]byte // nil value: the file did not exist

func takeSnapshot(paths ...string) (snapshot, error) {
	s := snapshot{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		switch {
		case err == nil:
			s[p] = b
		case errors.Is(err, fs.ErrNotExist):
			s[p] = nil
		default:
			return nil, fmt.Errorf("saving %s before the change: %w", p, err)
		}
	}
	return s, nil
}

// restore writes every file back, or removes the ones that did not exist.
// Files this package writes are all 0600.
func (s snapshot) restore() error {
	var errs []error
	for _, p := range sortedKeys(s) {
		if s[p] == nil {
			errs = append(errs, removeFile(p))
			continue
		}
		errs = append(errs, writeFileAtomic(p, s[p], 0o600))
	}
	return errors.Join(errs...)
}

// within joins name to dir and refuses a result outside dir; names are
// checked earlier, this is the last guard before touching the host.
func within(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if filepath.Dir(p) != filepath.Clean(dir) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("file name %q would leave %s", name, dir)
	}
	return p, nil
}
