package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/keyfile"
)

// maxKeyfileDirEntries bounds the keyfile directory the nmstatectl way
// reads before and after the apply: far above any real node's.
const maxKeyfileDirEntries = 4 * MaxConnections

// convergence makes the profiles `nmstatectl apply` had NetworkManager
// write into the plan's keyfiles, while the checkpoint is pending
// (docs/apply.md, "nmstatectl: converging on the next boot"). nmstatectl
// creates profiles with UUIDs of its own drawing and writes them in
// NetworkManager's format (address1=, addr-gen-mode=eui64, [proxy]);
// it modifies a profile in place, a renamed one keeping its file name; a
// checkpoint rollback rewrites what it restores, again in
// NetworkManager's format. The next boot brings the plan's keyfiles
// (the applicator writes them), so the live profiles are made those,
// before the reachability check tests them: then the check tests what the
// boot brings, and commit (which writes nothing) leaves one profile per
// device, the boot's, with its UUID.
type convergence struct {
	a       *Applier
	log     *logrus.Entry
	nmcli   string
	p       *Plan
	targets []string // the plan's keyfiles, host paths
	stale   []string // keyfiles of ours the plan no longer has
	// before is every regular file of the keyfile directory, and each
	// target and stale keyfile (nil: absent), before nmstatectl's apply.
	before snapshot
	// owned are the host paths the agent owned before the apply, and the
	// targets.
	owned map[string]bool
	// uuidsBefore are the UUIDs of every profile NetworkManager had.
	uuidsBefore map[string]bool
	// ours are the UUIDs of the agent's profiles: those it owned, the
	// plan's, and those nmstatectl created for the change.
	ours       map[string]bool
	prevActive []string
}

// newConvergence takes what converge and undo need before nmstatectl's
// apply. Nil (and no error) when NetworkManager cannot be asked through
// nmcli (not installed, not answering): then the real nmstatectl cannot
// apply either, and the profiles are left as it writes them, with a
// warning.
func (a *Applier) newConvergence(ctx context.Context, p *Plan, log *logrus.Entry) (*convergence, error) {
	nmcli, err := host.Lookup("nmcli", a.tools().Nmcli)
	if err != nil {
		log.WithError(err).Warn("no nmcli: the profiles nmstatectl has NetworkManager write are left as it writes them")
		return nil, nil
	}
	out, err := a.run(ctx, profilesCommand(nmcli))
	if err != nil {
		log.WithError(err).Warn("NetworkManager does not answer nmcli: the profiles nmstatectl has it write are left as it writes them")
		return nil, nil
	}
	c := &convergence{a: a, log: log, nmcli: nmcli, p: p, uuidsBefore: map[string]bool{}, ours: map[string]bool{}}
	for _, uuid := range parseProfiles(out) {
		c.uuidsBefore[uuid] = true
	}
	if c.prevActive, err = a.activeUUIDs(ctx, nmcli); err != nil {
		return nil, err
	}
	if c.targets, err = keyfileTargets(p); err != nil {
		return nil, err
	}
	if c.stale, err = a.staleKeyfiles(p, c.targets); err != nil {
		return nil, err
	}
	files, err := c.dirFiles()
	if err != nil {
		return nil, err
	}
	if c.before, err = takeSnapshot(a.files(), append(append(files, c.targets...), c.stale...)...); err != nil {
		return nil, err
	}
	if c.owned, err = a.ownedPaths(); err != nil {
		return nil, err
	}
	for _, t := range c.targets {
		c.owned[t] = true
	}
	for f, b := range c.before {
		if c.owned[f] {
			c.addUUID(b)
		}
	}
	for _, kf := range p.Keyfiles {
		c.addUUID(kf.Content)
	}
	return c, nil
}

// dirFiles lists the regular files of the keyfile directory, as host
// paths (none when it does not exist).
func (c *convergence) dirFiles() ([]string, error) {
	dir := c.p.paths.KeyfileDir
	entries, err := c.a.files().ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(entries) > maxKeyfileDirEntries {
		return nil, fmt.Errorf("%s holds %d entries, more than %d", c.a.host(dir), len(entries), maxKeyfileDirEntries)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// addUUID counts the profile in content as the agent's.
func (c *convergence) addUUID(content []byte) {
	if u := keyfileUUID(content); u != "" {
		c.ours[u] = true
	}
}

// keyfileUUID is the keyfile's [connection] uuid as NetworkManager holds
// it (internal/keyfile), "" when it has none or does not parse.
func keyfileUUID(content []byte) string {
	if content == nil {
		return ""
	}
	f, err := parseKeyfile("", content)
	if err != nil {
		return ""
	}
	u, err := f.String("connection", "uuid")
	if err != nil {
		return ""
	}
	return keyfile.NormalUUID(u)
}

// converge runs after a successful `nmstatectl apply --no-commit`: it
// records in the intent what NetworkManager wrote for the change, puts
// the plan's keyfiles in place of it (and removes the keyfiles of ours
// the plan no longer has, and those NetworkManager named otherwise),
// gives back its bytes to a foreign keyfile nmstatectl rewrote, reloads,
// and brings the plan's profiles up as the keyfile way does (activate,
// matchBoot). On failure it names the step.
func (c *convergence) converge(ctx context.Context) (string, error) {
	files := c.a.files()
	out, err := c.a.run(ctx, profilesCommand(c.nmcli))
	if err != nil {
		return "connection show", err
	}
	uuidOf := parseProfiles(out)
	now, err := c.dirFiles()
	if err != nil {
		return "reading the keyfiles NetworkManager wrote", err
	}
	written := snapshot{}  // NetworkManager's for the change: ours
	foreign := snapshot{}  // a profile not ours nmstatectl rewrote
	var elsewhere []string // NetworkManager's files under names not the plan's
	for _, f := range now {
		b, err := files.ReadFile(f, maxOwnedFile)
		if err != nil {
			return "reading the keyfiles NetworkManager wrote", err
		}
		was, existed := c.before[f]
		if existed && bytes.Equal(b, was) {
			continue
		}
		uuid := uuidOf[c.a.host(f)]
		switch {
		case c.owned[f] || slices.Contains(c.stale, f):
			written[f] = b
		case was == nil && uuid != "" && !c.uuidsBefore[uuid]:
			// A profile nmstatectl created for the change.
			written[f] = b
			c.ours[uuid] = true
		case was != nil:
			foreign[f] = was
		default:
			c.log.WithField("keyfile", c.a.host(f)).Warn("a keyfile appeared during the apply that is not a profile nmstatectl created: left alone")
			continue
		}
		if was == nil && !slices.Contains(c.targets, f) {
			elsewhere = append(elsewhere, f)
		}
	}
	if err := c.a.recordWritten(written); err != nil {
		return "recording the change", err
	}
	if err := files.MkdirAll(c.p.paths.KeyfileDir, 0o755); err != nil {
		return "installing keyfiles", err
	}
	content := map[string][]byte{}
	for i, t := range c.targets {
		if err := files.WriteFile(t, c.p.Keyfiles[i].Content, 0o600); err != nil {
			return "installing keyfiles", err
		}
		content[c.a.host(t)] = c.p.Keyfiles[i].Content
	}
	for _, f := range append(slices.Clone(c.stale), elsewhere...) {
		if err := files.Remove(f); err != nil {
			return "removing stale keyfiles", err
		}
	}
	for _, f := range slices.Sorted(maps.Keys(foreign)) {
		c.log.WithField("keyfile", c.a.host(f)).Warn("nmstatectl rewrote a profile that is not ours: its bytes are put back")
		if err := files.WriteFile(f, foreign[f], 0o600); err != nil {
			return "restoring a foreign keyfile", err
		}
	}
	if step, err := c.a.activate(ctx, c.nmcli, c.a.hostPaths(c.targets), content); err != nil {
		return step, err
	}
	return c.a.matchBoot(ctx, c.nmcli, c.a.hostPaths(c.targets), content)
}

// undo runs after `nmstatectl rollback` (or a failed apply, which rolls
// its own checkpoint back): NetworkManager has restored the profiles of
// the checkpoint, rewriting them in its format, re-adding a deleted one
// under a name of its choosing, and deleted the ones created since. The
// keyfile directory gets back the bytes it had before the apply: every
// file read then is written back when it differs, a file that appeared
// since is removed when it holds one of ours or a profile whose own file
// is written back, and NetworkManager reloads them; the connections
// active before come up again.
func (c *convergence) undo(ctx context.Context) error {
	files := c.a.files()
	var errs []error
	changed := false
	now, err := c.dirFiles()
	if err != nil {
		return err
	}
	restored := map[string]bool{} // the UUIDs of the files read before
	for _, b := range c.before {
		if u := keyfileUUID(b); u != "" {
			restored[u] = true
		}
	}
	for _, f := range now {
		if was, ok := c.before[f]; ok && was != nil {
			continue
		}
		b, err := files.ReadFile(f, maxOwnedFile)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Ours, or NetworkManager's re-add of a profile whose own file
		// gets its bytes back below (a profile nmstatectl deleted):
		// either way a second file for one UUID.
		if u := keyfileUUID(b); slices.Contains(c.targets, f) || c.ours[u] || u != "" && restored[u] {
			errs = append(errs, files.Remove(f))
			changed = true
		}
	}
	for _, f := range slices.Sorted(maps.Keys(c.before)) {
		was := c.before[f]
		b, err := files.ReadFile(f, maxOwnedFile)
		switch {
		case was == nil:
			continue // removed above when it was ours
		case err == nil && bytes.Equal(b, was):
			continue
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
			continue
		}
		errs = append(errs, files.WriteFile(f, was, 0o600))
		changed = true
	}
	if changed {
		if _, err := c.a.run(ctx, reloadCommand(c.nmcli)); err != nil {
			errs = append(errs, err)
		}
	}
	c.a.reactivate(ctx, c.nmcli, c.prevActive)
	return errors.Join(errs...)
}
