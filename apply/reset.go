package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/mudler/yip/pkg/schema"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/safefile"
)

// ResetNetwork removes the files listed in the manifest, the applicator and
// the manifest itself, then has NetworkManager reload its profiles. Files
// the agent does not own (foreign keyfiles, other /oem files) are never
// touched; a manifest entry outside the agent's directories is ignored.
func (a *Applier) ResetNetwork(ctx context.Context) error {
	pp := a.paths()
	m, err := a.readManifest()
	if err != nil {
		return fmt.Errorf("reset network: %w", err)
	}
	if m.Corrupt {
		// The manifest is gone; the applicator still names the keyfiles
		// it re-creates at every boot.
		if m.Files, err = a.applicatorFiles(); err != nil {
			return fmt.Errorf("reset network: %w", err)
		}
	}
	var remove []string
	for _, f := range m.Files {
		p := path.Clean(f.Path)
		if dir := path.Dir(p); p != pp.Applicator && dir != pp.KeyfileDir && dir != pp.StateDir {
			a.log().WithField("path", f.Path).Warn("reset network: manifest entry outside the agent's directories ignored")
			continue
		}
		remove = append(remove, a.host(p))
	}
	remove = append(remove, a.host(pp.Applicator), a.host(pp.manifestPath()))
	var errs []error
	seen := map[string]bool{}
	for _, r := range remove {
		if !seen[r] {
			seen[r] = true
			errs = append(errs, a.files().Remove(r))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reset network: %w", err)
	}
	a.log().WithField("files", len(seen)).Info("network config removed")
	// A missing nmcli is reported after the files are gone (they are what
	// the next boot reads), when the Runner could not run it either.
	nmcli, lookErr := Lookup("nmcli", a.tools().Nmcli)
	if lookErr != nil {
		nmcli = a.tools().Nmcli
	}
	if _, err := a.run(ctx, reloadCommand(nmcli)); err != nil {
		if lookErr != nil {
			err = lookErr
		}
		return fmt.Errorf("reset network: reloading NetworkManager: %w", err)
	}
	return nil
}

// applicatorFiles lists the files the applicator writes, for a reset
// without a manifest; a missing applicator names none.
func (a *Applier) applicatorFiles() ([]ManifestFile, error) {
	file := a.host(a.paths().Applicator)
	b, err := safefile.ReadFile(file, maxOwnedFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the applicator: %w", err)
	}
	var y schema.YipConfig
	if err := yaml.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("reading the applicator %s: %w", file, err)
	}
	var out []ManifestFile
	for _, stages := range y.Stages {
		for _, st := range stages {
			for _, f := range st.Files {
				out = append(out, ManifestFile{Path: f.Path, Kind: "keyfile"})
			}
		}
	}
	return out, nil
}
