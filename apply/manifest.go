package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
)

const manifestName = "network-manifest.json"

// Manifest lists the files the agent owns, as host paths (without Root).
type Manifest struct {
	Version      int            `json:"version"`
	Configurator string         `json:"configurator"`
	Digest       string         `json:"digest"`
	Files        []ManifestFile `json:"files"`
	// Pending is the intent of a change in flight (docs/apply.md, "Crash
	// consistency"): the files it is about to write and the hash of what
	// it writes, on disk before any of them. An entry owns the file at its
	// path only while that file holds those bytes (pendingOwns), so it
	// never claims a file someone else wrote.
	Pending []ManifestFile `json:"pending,omitempty"`
	// Corrupt: the manifest on disk could not be parsed and was kept
	// aside; this one is empty.
	Corrupt bool `json:"-"`
}

// ManifestFile is one owned file. Kind is applicator, digested or keyfile.
type ManifestFile struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"`
}

// Kinds of owned files.
const (
	kindKeyfile    = "keyfile"
	kindDigested   = "digested"
	kindApplicator = "applicator"
)

// manifest is what the plan owns once persisted: its keyfiles, the
// digested config and the applicator.
func (p *Plan) manifest() Manifest {
	m := Manifest{Version: 1, Configurator: p.Configurator, Digest: p.Digest()}
	for _, kf := range p.Keyfiles {
		m.Files = append(m.Files, ManifestFile{Path: path.Join(p.paths.KeyfileDir, kf.Name), Kind: kindKeyfile, SHA256: sum(kf.Content)})
	}
	m.Files = append(m.Files,
		ManifestFile{Path: p.digestedPath(), Kind: kindDigested, SHA256: sum(p.Digested)},
		ManifestFile{Path: p.paths.Applicator, Kind: kindApplicator, SHA256: sum(p.Applicator)})
	return m
}

// sum is the hex SHA-256 the manifest records of a file's content.
func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func (m *Manifest) encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding network manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// manifestPath is the manifest's host path (without Root).
func (p Paths) manifestPath() string { return path.Join(p.StateDir, manifestName) }

// maxManifest bounds the manifest: MaxConnections entries of a few
// hundred bytes each.
const maxManifest = 1 << 20

// readManifest returns the current manifest; a missing one is empty. A
// manifest that cannot be parsed is kept aside (like a corrupt state file)
// with a warning naming both files, and counts as empty with Corrupt set:
// a dead end at every boot helps nobody, and ResetNetwork then falls back
// on what the applicator names.
func (a *Applier) readManifest() (*Manifest, error) {
	file := a.paths().manifestPath()
	b, err := a.files().ReadFile(file, maxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return &Manifest{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading network manifest: %w", err)
	}
	var m Manifest
	if uErr := json.Unmarshal(b, &m); uErr != nil {
		aside, err := a.files().SetAside(file)
		if err != nil {
			return nil, fmt.Errorf("network manifest %s is corrupt (%v) and cannot be kept aside: %w", a.host(file), uErr, err)
		}
		a.log().WithField("file", a.host(file)).WithField("kept-as", aside).WithError(uErr).Warn("network manifest is corrupt: kept aside, starting without it")
		return &Manifest{Corrupt: true}, nil
	}
	return &m, nil
}

func (a *Applier) writeManifest(m *Manifest) error {
	b, err := m.encode()
	if err != nil {
		return err
	}
	return a.files().WriteFile(a.paths().manifestPath(), b, 0o600)
}

// mergeFiles is b then the entries of a not in b, by path.
func mergeFiles(a, b []ManifestFile) []ManifestFile {
	seen := map[string]bool{}
	var out []ManifestFile
	for _, f := range append(append([]ManifestFile(nil), b...), a...) {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	return out
}
