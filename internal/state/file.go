package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/safefile"
)

// MaxFile bounds the state file: a few keys and a TPM key blob.
const MaxFile = 1 << 20

// NoteFirstRegistration is Load's note when there is no state file.
const NoteFirstRegistration = "no state file: first registration"

// NotAFileError: the state file's path holds something else (a symlink, a
// directory, a FIFO). Every later run would fail the same way, so it needs
// a person, not a retry.
type NotAFileError struct {
	Path string // as files shows it
	Err  error
}

func (e *NotAFileError) Error() string {
	return fmt.Sprintf("reading state file %s: %v: remove it (a person or another program put it there)", e.Path, e.Err)
}

func (e *NotAFileError) Unwrap() error { return e.Err }

// Load reads the state file. Missing means first registration. A corrupt
// file is kept aside through files (as <path>.corrupt-<unix time> on the
// host; a dry run's printing edge only says so), and the run starts fresh;
// note says what happened.
func Load(files host.FS, path string) (st *State, note string, err error) {
	b, err := read(files, path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{}, NoteFirstRegistration, nil
	}
	if err != nil {
		return nil, "", err
	}
	st, uErr := decode(b)
	if uErr != nil {
		shown := files.Path(path)
		aside, rErr := files.SetAside(path)
		if rErr != nil {
			return nil, "", fmt.Errorf("state file %s is corrupt (%v) and could not be kept aside: %w", shown, uErr, rErr)
		}
		return &State{}, fmt.Sprintf("state file %s is corrupt (%v): kept as %s, registering as new", shown, uErr, aside), nil
	}
	return st, "", nil
}

// Inspect reads the state file as it is, for a reader that writes nothing
// (agent verify): a corrupt file is an error, not kept aside; a missing
// one is an error that wraps fs.ErrNotExist.
func Inspect(files host.FS, path string) (*State, error) {
	b, err := read(files, path)
	if err != nil {
		return nil, err
	}
	st, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w", files.Path(path), err)
	}
	return st, nil
}

// read is the bounded read both readers share; a path that holds no
// regular file is a *NotAFileError.
func read(files host.FS, path string) ([]byte, error) {
	b, err := files.ReadFile(path, MaxFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrSymlink):
		return nil, &NotAFileError{Path: files.Path(path), Err: err}
	case err != nil:
		return nil, fmt.Errorf("reading state file %s: %w", files.Path(path), err)
	}
	return b, nil
}

func decode(b []byte) (*State, error) {
	st := &State{loaded: b}
	if err := yaml.Unmarshal(b, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Save writes the state through files (atomically on the host), creating
// its directory with 0700 as upstream does; an unchanged state is not
// written again.
func (s *State) Save(files host.FS, path string) error {
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	if bytes.Equal(b, s.loaded) {
		return nil
	}
	if err := files.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	if err := files.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	s.loaded = b
	return nil
}
