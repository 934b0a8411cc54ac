package apply

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
)

func reloadCommand(nmcli string) host.Command {
	return host.Command{Name: nmcli, Args: []string{"connection", "reload"}}
}

func profilesCommand(nmcli string) host.Command {
	return host.Command{Name: nmcli, Args: []string{"-t", "-f", "UUID,FILENAME", "connection", "show"}, ReadOnly: true}
}

func (a *Applier) applyKeyfiles(ctx context.Context, p *Plan, reachable func(context.Context) error) error {
	nmcli, err := host.Lookup("nmcli", a.tools().Nmcli)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	files := a.files()
	dir := p.paths.KeyfileDir
	targets, err := keyfileTargets(p)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	log := a.log().WithField("configurator", p.Configurator)
	if note := p.GeneratorNote(); note != "" {
		log = log.WithField("generator", p.Generator)
		log.Info(note)
	}
	stale, err := a.staleKeyfiles(p, targets)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	prevKeyfiles, err := takeSnapshot(files, append(slices.Clone(targets), stale...)...)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	prevFiles, err := takeSnapshot(files, a.persistTargets(p)...)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	undoDir := a.stateDirUndo()
	// What is up now comes back on a rollback, though matchBoot may have
	// disconnected its device.
	prevActive, err := a.activeUUIDs(ctx, nmcli)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	prevFilesUp := prevKeyfiles.existing(append(slices.Clone(stale), targets...))
	back := func(step string, cause error) error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.checkpointTimeout())
		defer cancel()
		errs := []error{prevKeyfiles.restore(files), prevFiles.restore(files), undoDir()}
		if _, err := a.activate(rctx, nmcli, a.hostPaths(prevFilesUp), a.byHostPath(prevKeyfiles)); err != nil {
			errs = append(errs, err)
		}
		a.reactivate(rctx, nmcli, prevActive)
		log.WithError(cause).WithField("step", step).Warn("network change rolled back")
		return &LiveApplyError{Step: step, Err: cause, RollbackErr: errors.Join(errs...)}
	}
	if err := files.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	if step, err := a.writeKeyfiles(p, targets, stale); err != nil {
		return back(step, err)
	}
	content := map[string][]byte{}
	for i, t := range targets {
		content[a.host(t)] = p.Keyfiles[i].Content
	}
	if step, err := a.activate(ctx, nmcli, a.hostPaths(targets), content); err != nil {
		return back(step, err)
	}
	if step, err := a.matchBoot(ctx, nmcli, a.hostPaths(targets), content); err != nil {
		return back(step, err)
	}
	if err := a.checkReachable(ctx, reachable); err != nil {
		return back("reachability check", err)
	}
	if err := a.Persist(p); err != nil {
		return back("persist", err)
	}
	log.Info("network keyfiles applied")
	return nil
}

// writeKeyfiles puts the plan's keyfiles in place and removes the stale
// ones, the intent first: a power cut after any keyfile leaves them
// recognisably ours (docs/apply.md, "Crash consistency"). On failure it
// names the step for the rollback.
func (a *Applier) writeKeyfiles(p *Plan, targets, stale []string) (string, error) {
	if err := a.writeIntent(p); err != nil {
		return "recording the change", err
	}
	files := a.files()
	for i, t := range targets {
		if err := files.WriteFile(t, p.Keyfiles[i].Content, 0o600); err != nil {
			return "installing keyfiles", err
		}
	}
	for _, s := range stale {
		if err := files.Remove(s); err != nil {
			return "removing stale keyfiles", err
		}
	}
	return "", nil
}

// existing are those of paths the snapshot holds a file for, in order.
func (s snapshot) existing(paths []string) []string {
	var out []string
	for _, f := range paths {
		if s[f] != nil {
			out = append(out, f)
		}
	}
	return out
}

// keyfileTargets are the host paths the plan's keyfiles go to.
func keyfileTargets(p *Plan) ([]string, error) {
	var targets []string
	for _, kf := range p.Keyfiles {
		t, err := within(p.paths.KeyfileDir, kf.Name)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// staleKeyfiles are the keyfiles owned by the previous config (or by a
// change cut short; without a manifest, named by the applicator:
// ownedBefore) and not by this one: they go away too, else
// NetworkManager keeps two profiles for one device.
func (a *Applier) staleKeyfiles(p *Plan, targets []string) ([]string, error) {
	old, err := a.readManifest()
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, f := range a.ownedBefore(old) {
		if f.Kind != state.KindKeyfile || path.Dir(f.Path) != p.paths.KeyfileDir {
			continue
		}
		if h := path.Clean(f.Path); !slices.Contains(targets, h) {
			stale = append(stale, h)
		}
	}
	return stale, nil
}

// Activate reloads NetworkManager's profiles and brings up the ones stored
// in files (paths as on this machine, anywhere NetworkManager reads keyfiles from, such
// as its runtime directory under /run), by UUID, as a live keyfile apply
// does. No files: only the reload. Every file named is brought up, whatever
// its autoconnect: the caller asks for it. The agent's bootstrap network
// uses it.
func (a *Applier) Activate(ctx context.Context, files []string) error {
	nmcli, err := host.Lookup("nmcli", a.tools().Nmcli)
	if err != nil {
		return err
	}
	if step, err := a.activate(ctx, nmcli, files, nil); err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	return nil
}

// activate reloads NetworkManager's profiles and brings up the ones stored
// in files (paths as on this machine, as nmcli names them), by UUID, but for those whose content says
// autoconnect=false (nmstate's `state: down`): a boot would not bring them
// up either. A nil content brings every file up (Activate).
func (a *Applier) activate(ctx context.Context, nmcli string, files []string, content map[string][]byte) (step string, err error) {
	if _, err := a.run(ctx, reloadCommand(nmcli)); err != nil {
		return "connection reload", err
	}
	out, err := a.run(ctx, profilesCommand(nmcli))
	if err != nil {
		return "connection show", err
	}
	byFile := parseProfiles(out)
	for _, f := range files {
		if content != nil && !autoconnects(content[f]) {
			a.log().WithField("keyfile", f).Debug("autoconnect=false: loaded, not brought up")
			continue
		}
		uuid, ok := byFile[f]
		if !ok {
			return "connection up", fmt.Errorf("NetworkManager did not load %s (check its keyfile directory and the file's contents)", f)
		}
		if _, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"connection", "up", "uuid", uuid}}); err != nil {
			return "connection up", err
		}
	}
	return "", nil
}

// autoconnects says whether NetworkManager brings the keyfile's profile up
// by itself: its reading of connection.autoconnect (GLib's boolean: only
// false or 0 say no; "no" is a value it drops, so the default, yes);
// unreadable content counts as yes.
func autoconnects(content []byte) bool {
	return readProfile("", content).Autoconnect
}

// parseProfiles reads `nmcli -t -f UUID,FILENAME connection show`: one
// profile a line, fields split at the first colon (a UUID has none), the
// terse format's escapes (\: and \\) undone in the file name.
func parseProfiles(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		uuid, file, ok := strings.Cut(line, ":")
		if !ok || file == "" {
			continue
		}
		file = strings.NewReplacer(`\:`, ":", `\\`, `\`).Replace(file)
		m[file] = uuid
	}
	return m
}

// hostPaths maps host paths to where they are on this machine (what nmcli
// reports as a profile's FILENAME).
func (a *Applier) hostPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = a.host(p)
	}
	return out
}

// byHostPath is s keyed by where each file is on this machine.
func (a *Applier) byHostPath(s snapshot) map[string][]byte {
	out := make(map[string][]byte, len(s))
	for p, b := range s {
		out[a.host(p)] = b
	}
	return out
}
