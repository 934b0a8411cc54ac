package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/nodereg/nodereg/internal/state"

	"github.com/nodereg/nodereg/internal/errclass"
)

// NotOwnedError refuses a keyfile the plan would write over a file the
// agent does not own: an image's or an admin's profile of the same name.
// Writing it would put it in our manifest, and --reset-network would then
// remove it; only a person can resolve the clash (exit 78).
type NotOwnedError struct {
	Path string // host path (without Root)
}

// Class: a person must rename one of the two.
func (e *NotOwnedError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *NotOwnedError) Cause() string { return "keyfile not owned by the agent" }

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("keyfile %s exists and is not ours (not in the agent's network manifest): refusing to replace it; rename or remove it, or change the network config's connection names", e.Path)
}

// checkOwnership refuses every keyfile target that exists and is not ours.
// Ours: listed in the manifest, or named by the intent of a change cut
// short and holding what it wrote (pendingOwns). The yip applicator writes our keyfiles at
// every boot before the agent runs, so an existing file the manifest lists
// is ours; the first run after an install finds the manifest the hand-over
// put in /oem. Without a readable manifest (none, or corrupt), the files
// the applicator names count as ours: it rewrites them at every boot
// anyway, and an image installed by elemental-register is taken over this
// way. It reads only: a plan has no side effects.
func (a *Applier) checkOwnership(p *Plan, m manifestRead) error {
	owned, err := a.planOwned(p, m)
	if owned == nil {
		return err
	}
	pending := pendingByPath(m)
	for i, target := range p.targets() {
		if owned[target] || a.anyPendingOwns(pending[target], p.Keyfiles[i].Content) {
			continue
		}
		if _, err := a.files().Lstat(target); err == nil {
			return &NotOwnedError{Path: target}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("plan network (%s): checking %s: %w", p.Configurator, target, err)
		}
	}
	return nil
}

// manifestRead is the manifest as state.ReadManifest returned it: nil
// with no error when there is none.
type manifestRead struct {
	m   *state.Manifest
	err error
}

// manifestNow reads the manifest in the state directory as it is,
// setting nothing aside (a check reads only).
func (a *Applier) manifestNow() manifestRead {
	m, err := state.ReadManifest(a.files(), a.paths().manifestPath())
	return manifestRead{m, err}
}

// planManifest is the manifest a plan's checks judge it by, read only
// when the plan writes a keyfile (no check looks at it otherwise).
func (a *Applier) planManifest(p *Plan) manifestRead {
	if len(p.Keyfiles) == 0 {
		return manifestRead{}
	}
	return a.manifestNow()
}

// planOwned is ownedPaths for the checks of a plan, which both refuse the
// same way when the manifest cannot be read; nil (and no error) when the
// plan writes no keyfile.
func (a *Applier) planOwned(p *Plan, m manifestRead) (map[string]bool, error) {
	if len(p.Keyfiles) == 0 {
		return nil, nil
	}
	owned, err := a.ownedBy(m)
	if err != nil {
		return nil, fmt.Errorf("plan network (%s): %w", p.Configurator, err)
	}
	return owned, nil
}

// targets are where the plan's keyfiles go, as host paths.
func (p *Plan) targets() []string {
	out := make([]string, len(p.Keyfiles))
	for i, kf := range p.Keyfiles {
		out[i] = path.Join(p.paths.KeyfileDir, kf.Name)
	}
	return out
}

// ownedPaths are the host paths (without Root) the agent owns, by its
// manifest or, without a readable one, by its applicator.
func (a *Applier) ownedPaths() (map[string]bool, error) { return a.ownedBy(a.manifestNow()) }

// ownedBy is ownedPaths by the manifest read as mr.
func (a *Applier) ownedBy(mr manifestRead) (map[string]bool, error) {
	owned := map[string]bool{}
	var files []state.ManifestFile
	m, err := mr.m, mr.err
	var corrupt *state.CorruptError
	switch {
	case err == nil && m != nil:
		files = a.ownedNow(m)
	case err == nil, errors.As(err, &corrupt):
		if files, err = a.applicatorFiles(); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	for _, f := range files {
		owned[path.Clean(f.Path)] = true
	}
	return owned, nil
}
