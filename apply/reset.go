package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/yipschema"
)

// ReloadError says the agent's network files are removed but
// NetworkManager could not be told (not installed, not running): the next
// `nmcli connection reload` or boot picks the change up.
type ReloadError struct{ Err error }

func (e *ReloadError) Error() string {
	return "files removed, NetworkManager not reloaded: " + e.Err.Error()
}

func (e *ReloadError) Unwrap() error { return e.Err }

// ResetNetwork is RemoveNetwork without the list of removed files.
func (a *Applier) ResetNetwork(ctx context.Context) error {
	_, err := a.RemoveNetwork(ctx)
	return err
}

// RemoveNetwork removes the network config this agent wrote: the files in
// its manifest and those of a change cut short that hold what it wrote
// (ownedNow; only inside its own directories: foreign keyfiles and other
// /oem files are never touched), the applicator and the manifest. It
// returns the host paths of those that existed and went through Files (a
// dry run's PrintFiles lists them), and has NetworkManager reload its
// profiles through Runner. Nothing there is not an error, and
// NetworkManager is then left alone. The files go first, so a
// NetworkManager that is down costs only a *ReloadError.
func (a *Applier) RemoveNetwork(ctx context.Context) ([]string, error) {
	pp := a.paths()
	m, err := a.readManifest()
	if err != nil {
		return nil, fmt.Errorf("reset network: %w", err)
	}
	if m.Corrupt {
		// The manifest is gone; the applicator still names the keyfiles
		// it re-creates at every boot.
		if m.Files, err = a.applicatorFiles(); err != nil {
			return nil, fmt.Errorf("reset network: %w", err)
		}
	}
	var candidates []string
	for _, f := range a.ownedNow(m) {
		p := path.Clean(f.Path)
		if dir := path.Dir(p); p != pp.Applicator && dir != pp.KeyfileDir && dir != pp.StateDir {
			a.log().WithField("path", f.Path).Warn("reset network: manifest entry outside the agent's directories ignored")
			continue
		}
		candidates = append(candidates, p)
	}
	candidates = append(candidates, pp.Applicator, pp.manifestPath())
	var present []string
	for _, c := range candidates {
		if _, err := a.files().Lstat(c); err == nil && !slices.Contains(present, c) {
			present = append(present, c)
		}
	}
	var removed []string
	var errs []error
	for _, p := range present {
		if err := a.files().Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, a.host(p))
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("reset network: %w", err)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	// A missing nmcli is reported after the files are gone (they are what
	// the next boot reads), when the Runner could not run it either.
	nmcli, lookErr := host.Lookup("nmcli", a.tools().Nmcli)
	if lookErr != nil {
		nmcli = a.tools().Nmcli
	}
	if _, err := a.run(ctx, reloadCommand(nmcli)); err != nil {
		if lookErr != nil {
			err = lookErr
		}
		return removed, &ReloadError{Err: err}
	}
	return removed, nil
}

// applicatorFiles lists the files the applicator writes, for a reset
// without a manifest; a missing applicator names none.
func (a *Applier) applicatorFiles() ([]state.ManifestFile, error) {
	file := a.paths().Applicator
	b, err := a.files().ReadFile(file, maxOwnedFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the applicator: %w", err)
	}
	var y yipschema.Config
	if err := yaml.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("reading the applicator %s: %w", a.host(file), err)
	}
	var out []state.ManifestFile
	for _, stages := range y.Stages {
		for _, st := range stages {
			for _, f := range st.Files {
				out = append(out, state.ManifestFile{Path: f.Path, Kind: state.KindKeyfile})
			}
		}
	}
	return out, nil
}
