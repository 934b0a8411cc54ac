package apply

import (
	"fmt"
	"path"

	"github.com/nodereg/nodereg/protocol"
)

// PersistedFile is one file Persist writes, at its host path (without Root).
type PersistedFile struct {
	Path    string
	Content []byte
}

// Persisted lists the files Persist writes for p, in the order it writes
// them, with the content a first persist (no earlier manifest) gives them:
// the digested config, the yip applicator and the manifest. The install and
// reset hand-over carries exactly these into the new system's /oem.
func (p *Plan) Persisted() ([]PersistedFile, error) {
	if p.Configurator == protocol.ConfiguratorNone {
		return nil, nil
	}
	m := p.manifest()
	b, err := m.Encode()
	if err != nil {
		return nil, err
	}
	return []PersistedFile{
		{Path: p.digestedPath(), Content: p.Digested},
		{Path: p.paths.Applicator, Content: p.Applicator},
		{Path: p.paths.manifestPath(), Content: b},
	}, nil
}

// persistTargets are the host files Persist may replace, so a failed live
// apply can restore all of them.
func (a *Applier) persistTargets(p *Plan) []string {
	return []string{p.paths.Applicator, p.digestedPath(), a.paths().manifestPath()}
}

// Persist writes the digested config, the yip applicator and the manifest
// under /oem, each atomically. The manifest is written first with the
// union of old and new files, so an interruption never leaves an owned file
// unlisted. A none plan persists nothing.
func (a *Applier) Persist(p *Plan) error {
	if p.Configurator == protocol.ConfiguratorNone {
		return nil
	}
	if p.Applicator == nil {
		return fmt.Errorf("persist network: plan for %s has no applicator", p.Configurator)
	}
	files := a.files()
	old, err := a.readManifest()
	if err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	m := p.manifest()
	union := m
	union.Files = mergeFiles(old.Files, m.Files)
	stateDir := a.paths().StateDir
	if err := files.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("persist network: creating %s: %w", a.host(stateDir), err)
	}
	if err := files.MkdirAll(path.Dir(p.paths.Applicator), 0o755); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	if err := a.writeManifest(&union); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	if err := files.WriteFile(p.digestedPath(), p.Digested, 0o600); err != nil {
		return fmt.Errorf("persist network: digested config: %w", err)
	}
	if err := files.WriteFile(p.paths.Applicator, p.Applicator, 0o600); err != nil {
		return fmt.Errorf("persist network: yip applicator: %w", err)
	}
	if err := a.writeManifest(&m); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	a.log().WithField("configurator", p.Configurator).WithField("digest", m.Digest).Info("network config persisted")
	return nil
}
