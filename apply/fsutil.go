package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
)

// maxOwnedFile bounds a file the agent owns and reads back (keyfile,
// applicator, digested config): far above any real one.
const maxOwnedFile = 4 << 20

// snapshot is the content (or absence) of files, so a failed change can put
// them back byte for byte.
type snapshot map[string][]byte // nil value: the file did not exist

func takeSnapshot(files host.FS, paths ...string) (snapshot, error) {
	s := snapshot{}
	for _, p := range paths {
		b, err := files.ReadFile(p, maxOwnedFile)
		switch {
		case err == nil:
			s[p] = b
		case errors.Is(err, fs.ErrNotExist):
			s[p] = nil
		default:
			return nil, fmt.Errorf("saving %s before the change: %w", files.Path(p), err)
		}
	}
	return s, nil
}

// restore writes every file back through files, or removes the ones that
// did not exist. Files this package writes are all 0600.
func (s snapshot) restore(files host.FS) error {
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(s)) {
		if s[p] == nil {
			errs = append(errs, files.Remove(p))
			continue
		}
		errs = append(errs, files.WriteFile(p, s[p], 0o600))
	}
	return errors.Join(errs...)
}

// within joins name to dir (host paths) and refuses a result outside dir;
// names are checked earlier, this is the last guard before touching the
// host.
func within(dir, name string) (string, error) {
	p := path.Join(dir, name)
	if path.Dir(p) != path.Clean(dir) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("file name %q would leave %s", name, dir)
	}
	return p, nil
}
