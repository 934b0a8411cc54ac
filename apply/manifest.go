package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"

	"github.com/nodereg/nodereg/internal/state"
)

// manifest is what the plan owns once persisted: its keyfiles, the
// digested config and the applicator.
func (p *Plan) manifest() state.Manifest {
	m := state.Manifest{Version: 1, Configurator: p.Configurator, Digest: p.Digest()}
	for _, kf := range p.Keyfiles {
		m.Files = append(m.Files, state.ManifestFile{Path: path.Join(p.paths.KeyfileDir, kf.Name), Kind: state.KindKeyfile, SHA256: sum(kf.Content)})
	}
	m.Files = append(m.Files,
		state.ManifestFile{Path: p.digestedPath(), Kind: state.KindDigested, SHA256: sum(p.Digested)},
		state.ManifestFile{Path: p.paths.Applicator, Kind: state.KindApplicator, SHA256: sum(p.Applicator)})
	return m
}

// sum is the hex SHA-256 the manifest records of a file's content.
func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// manifestPath is the manifest's host path (without Root).
func (p Paths) manifestPath() string { return state.ManifestPath(p.StateDir) }

// readManifest returns the current manifest; a missing one is empty. A
// manifest that cannot be parsed is kept aside (like a corrupt state file)
// with a warning naming both files, and counts as empty with Corrupt set:
// a dead end at every boot helps nobody, and ResetNetwork then falls back
// on what the applicator names.
func (a *Applier) readManifest() (*state.Manifest, error) {
	file := a.paths().manifestPath()
	m, err := state.ReadManifest(a.files(), file)
	var corrupt *state.CorruptError
	switch {
	case errors.As(err, &corrupt):
		aside, aErr := a.files().SetAside(file)
		if aErr != nil {
			return nil, fmt.Errorf("network manifest %s is corrupt (%v) and cannot be kept aside: %w", a.host(file), corrupt.Err, aErr)
		}
		a.log().WithField("file", a.host(file)).WithField("kept-as", aside).WithError(corrupt.Err).Warn("network manifest is corrupt: kept aside, starting without it")
		return &state.Manifest{Corrupt: true}, nil
	case err != nil:
		return nil, err
	case m == nil:
		return &state.Manifest{}, nil
	}
	return m, nil
}

func (a *Applier) writeManifest(m *state.Manifest) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	return a.files().WriteFile(a.paths().manifestPath(), b, 0o600)
}

// mergeFiles is b then the entries of a not in b, by path.
func mergeFiles(a, b []state.ManifestFile) []state.ManifestFile {
	seen := map[string]bool{}
	var out []state.ManifestFile
	for _, f := range append(append([]state.ManifestFile(nil), b...), a...) {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	return out
}
