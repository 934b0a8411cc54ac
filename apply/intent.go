package apply

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"syscall"

	"github.com/nodereg/nodereg/internal/state"
)

// writeIntent puts the intent of p on disk before p writes anything
// (docs/apply.md, "Crash consistency"): the manifest keeps what the agent
// owns now (its files, and those of an earlier change cut short that hold
// the bytes it meant to write) and lists p's files as pending, each with the
// hash of its content. The write is synced, file and directory, before the
// first keyfile or /oem file of p. An intent already on disk is not written
// again (Persist after a live apply's keyfiles).
func (a *Applier) writeIntent(p *Plan) error {
	old, err := a.readManifest()
	if err != nil {
		return err
	}
	m := p.manifest()
	if len(old.Pending) >= len(m.Files) && slices.Equal(old.Pending[:len(m.Files)], m.Files) {
		// This change's intent, perhaps with what NetworkManager wrote
		// for it since (recordWritten).
		return nil
	}
	intent := state.Manifest{Version: 1, Configurator: old.Configurator, Digest: old.Digest,
		Files: a.ownedBefore(old), Pending: m.Files}
	b, err := intent.Encode()
	if err != nil {
		return err
	}
	file := a.paths().manifestPath()
	if cur, err := a.files().ReadFile(file, state.MaxManifest); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	if err := a.files().MkdirAll(a.paths().StateDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", a.host(a.paths().StateDir), err)
	}
	if err := a.files().WriteFile(file, b, 0o600); err != nil {
		return fmt.Errorf("writing the network change's intent: %w", err)
	}
	return nil
}

// ownedNow is what m says the agent owns: its files, then each pending
// entry whose file holds exactly the bytes recorded for it.
func (a *Applier) ownedNow(m *state.Manifest) []state.ManifestFile {
	var claimed []state.ManifestFile
	for _, f := range capPending(m.Pending) {
		if a.pendingOwns(f, nil) {
			claimed = append(claimed, f)
		}
	}
	return mergeFiles(claimed, slices.Clone(m.Files))
}

// ownedBefore is what the agent owns before a change: ownedNow of the
// manifest or, with none to read (missing, or corrupt and kept aside), the
// keyfiles the applicator names, as ownedPaths takes them. An applicator
// that does not parse (torn) names nothing.
func (a *Applier) ownedBefore(old *state.Manifest) []state.ManifestFile {
	if !old.Corrupt && (len(old.Files) > 0 || len(old.Pending) > 0) {
		return a.ownedNow(old)
	}
	files, err := a.applicatorFiles()
	if err != nil {
		a.log().WithError(err).Warn("no manifest, and the applicator names no keyfile that can be trusted")
		return nil
	}
	return files
}

// pendingOwns says whether the file at an intent's entry is the one the
// change cut short wrote: it holds the recorded bytes or, when want (what a
// plan writes there now) hashes to the record, a prefix of want, which is
// what a write cut short leaves where a rename is not atomic. An entry
// outside the agent's directories, an absent, unreadable or non-regular
// file, or any other bytes are not ours: the record holds a hash the agent
// computed of what it was about to write, so a server choosing names and
// contents cannot make it name a file that existed before it (Plan refuses
// those first) nor one whose bytes differ.
func (a *Applier) pendingOwns(f state.ManifestFile, want []byte) bool {
	if f.Path == "" || !a.intentPath(f.Path) {
		return false
	}
	b, err := a.files().ReadFile(f.Path, maxOwnedFile)
	if err != nil {
		return false
	}
	if sum(b) == f.SHA256 {
		return true
	}
	return want != nil && sum(want) == f.SHA256 && bytes.HasPrefix(want, b)
}

// intentPath: p is a clean path in the keyfile directory or the state
// directory, or the applicator; an intent names nothing else.
func (a *Applier) intentPath(p string) bool {
	pp := a.paths()
	if path.Clean(p) != p || path.Base(p)[0] == '.' {
		return false
	}
	return p == pp.Applicator || path.Dir(p) == path.Clean(pp.KeyfileDir) || path.Dir(p) == path.Clean(pp.StateDir)
}

// pendingByPath is the intent in the manifest read as mr, by path (a
// path may have two entries: the keyfile the plan writes there and the
// one NetworkManager wrote first, recordWritten); none (or no readable
// manifest) is empty.
func pendingByPath(mr manifestRead) map[string][]state.ManifestFile {
	out := map[string][]state.ManifestFile{}
	m, err := mr.m, mr.err
	if err != nil || m == nil {
		return out
	}
	for _, f := range capPending(m.Pending) {
		out[path.Clean(f.Path)] = append(out[path.Clean(f.Path)], f)
	}
	return out
}

// anyPendingOwns is pendingOwns of any of fs.
func (a *Applier) anyPendingOwns(fs []state.ManifestFile, want []byte) bool {
	return slices.ContainsFunc(fs, func(f state.ManifestFile) bool { return a.pendingOwns(f, want) })
}

// capPending bounds the entries an intent is read for: a plan writes at
// most MaxConnections keyfiles, the digested config and the applicator,
// and nmstatectl's apply has NetworkManager write at most as many
// keyfiles of its own first (recordWritten).
func capPending(fs []state.ManifestFile) []state.ManifestFile {
	return fs[:min(len(fs), 2*MaxConnections+2)]
}

// recordWritten adds to the intent on disk the keyfiles NetworkManager
// wrote for the change in flight (nmstatectl apply creates and rewrites
// profiles in its own format, random UUIDs and all), each with the hash
// of the bytes it holds now, synced before the agent replaces or removes
// any of them: a power cut from here on leaves NetworkManager's files
// recognisably ours by those exact bytes, as the plan's own entries are
// (docs/apply.md, "Crash consistency"). Only the nmstatectl way calls it,
// with files in the keyfile directory that did not exist before the
// apply or that the agent owned.
func (a *Applier) recordWritten(written snapshot) error {
	if len(written) == 0 {
		return nil
	}
	m, err := a.readManifest()
	if err != nil {
		return err
	}
	if len(written) > MaxConnections {
		return fmt.Errorf("NetworkManager wrote %d keyfiles for the change, more than %d", len(written), MaxConnections)
	}
	for _, p := range slices.Sorted(maps.Keys(written)) {
		if written[p] == nil {
			continue
		}
		f := state.ManifestFile{Path: p, Kind: state.KindKeyfile, SHA256: sum(written[p])}
		if !slices.Contains(m.Pending, f) {
			m.Pending = append(m.Pending, f)
		}
	}
	if err := a.writeManifest(m); err != nil {
		return fmt.Errorf("recording the keyfiles NetworkManager wrote: %w", err)
	}
	return nil
}

// stateDirUndo returns what a way back calls to remove the state directory
// again when the intent is about to create it: a rolled-back first apply
// leaves /oem as it found it. A directory that is not empty by then (a
// file someone else put there) stays.
func (a *Applier) stateDirUndo() func() error {
	dir := a.paths().StateDir
	if _, err := a.files().Lstat(dir); err == nil {
		return func() error { return nil }
	}
	return func() error {
		if err := a.files().Remove(dir); err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return err
		}
		return nil
	}
}
