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
// under /oem, each atomically, in the order docs/apply.md ("Crash
// consistency") proves safe at every prefix: the intent first (the
// manifest with what the agent owns now and p's files pending; a live
// apply has written it already, before its keyfiles), then the digested
// config and the applicator, then the manifest that owns exactly p's files.
// A none plan persists nothing.
func (a *Applier) Persist(p *Plan) error {
	if p.Configurator == protocol.ConfiguratorNone {
		return nil
	}
	if p.Applicator == nil {
		return fmt.Errorf("persist network: plan for %s has no applicator", p.Configurator)
	}
	files := a.files()
	if err := a.writeIntent(p); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	if err := files.MkdirAll(path.Dir(p.paths.Applicator), 0o755); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	if err := files.WriteFile(p.digestedPath(), p.Digested, 0o600); err != nil {
		return fmt.Errorf("persist network: digested config: %w", err)
	}
	if err := files.WriteFile(p.paths.Applicator, p.Applicator, 0o600); err != nil {
		return fmt.Errorf("persist network: yip applicator: %w", err)
	}
	m := p.manifest()
	if err := a.writeManifest(&m); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	a.log().WithField("configurator", p.Configurator).WithField("digest", m.Digest).Info("network config persisted")
	return nil
}
