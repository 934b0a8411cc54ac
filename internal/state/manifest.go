package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/nodereg/nodereg/internal/host"
)

// ManifestName is the file apply's persist writes in its state directory
// (host.StateDir), listing what the agent owns (docs/apply.md).
const ManifestName = "network-manifest.json"

// MaxManifest bounds the manifest: apply's MaxConnections entries of a
// few hundred bytes each.
const MaxManifest = 1 << 20

// Manifest lists the files the agent owns, as host paths (without Root).
type Manifest struct {
	Version      int            `json:"version"`
	Configurator string         `json:"configurator"`
	Digest       string         `json:"digest"`
	Files        []ManifestFile `json:"files"`
	// Pending is the intent of a change in flight (docs/apply.md, "Crash
	// consistency"): the files it is about to write and the hash of what
	// it writes, on disk before any of them. apply owns the rule by which
	// an entry owns the file at its path (only while the file holds those
	// bytes); a reader that does not apply it must not count these as the
	// agent's.
	Pending []ManifestFile `json:"pending,omitempty"`
	// Corrupt: the manifest on disk could not be parsed and was kept
	// aside; this one is empty.
	Corrupt bool `json:"-"`
}

// ManifestFile is one owned file.
type ManifestFile struct {
	Path   string   `json:"path"`
	Kind   FileKind `json:"kind"`
	SHA256 string   `json:"sha256"`
}

// FileKind is what an owned file is, as the manifest names it.
type FileKind string

// Kinds of owned files.
const (
	// KindKeyfile is a NetworkManager keyfile (NetworkManager's own copy
	// of the config).
	KindKeyfile FileKind = "keyfile"
	// KindDigested is the digested network config under /oem.
	KindDigested FileKind = "digested"
	// KindApplicator is the yip applicator under /oem.
	KindApplicator FileKind = "applicator"
)

// ManifestPath is the manifest's host path in the state directory dir.
func ManifestPath(dir string) string { return path.Join(dir, ManifestName) }

// CorruptError: the file was read but does not parse.
type CorruptError struct {
	Path string // as files shows it
	Err  error
}

func (e *CorruptError) Error() string { return fmt.Sprintf("%s is corrupt: %v", e.Path, e.Err) }

func (e *CorruptError) Unwrap() error { return e.Err }

// ReadManifest reads the manifest at host path p, bounded: nil with no
// error when there is none, a *CorruptError when it does not parse (the
// caller decides whether to keep it aside).
func ReadManifest(files host.FS, p string) (*Manifest, error) {
	b, err := files.ReadFile(p, MaxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading network manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &CorruptError{Path: files.Path(p), Err: err}
	}
	return &m, nil
}

// Encode is the manifest as persisted: indented JSON and a newline.
func (m *Manifest) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding network manifest: %w", err)
	}
	return append(b, '\n'), nil
}
