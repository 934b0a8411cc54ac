package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// ApplyLive makes the plan the running network with a way back, then
// persists it. nmstate by nmstatectl: apply with a checkpoint, check
// reachable, persist, commit. nmstate by the built-in translator,
// nmconnections, nmc: install the keyfiles, reload, bring the
// connections up, check reachable, persist. Any failure restores the
// previous network and the previous applicator byte for byte and returns a
// *LiveApplyError (errors.Is ErrRolledBack). reachable gets a context whose
// deadline ends before the checkpoint would expire. A keyfile target that
// exists and is not ours fails it before anything is written
// (*NotOwnedError).
func (a *Applier) ApplyLive(ctx context.Context, p *Plan, reachable func(context.Context) error) error {
	// Checked again: a file may have appeared since the plan.
	if err := a.checkOwnership(p, a.planManifest(p)); err != nil {
		return err
	}
	switch p.Configurator {
	case protocol.ConfiguratorNone:
		return nil
	case protocol.ConfiguratorNmstate:
		if p.nmstatectlLive() {
			return a.applyNmstate(ctx, p, reachable)
		}
		// Keyfiles of the built-in translator: no nmstatectl to apply
		// them, so they go as nmconnections do.
		return a.applyKeyfiles(ctx, p, reachable)
	case protocol.ConfiguratorNmconnections, protocol.ConfiguratorNmc:
		return a.applyKeyfiles(ctx, p, reachable)
	}
	return &FieldError{Path: "configurator", Reason: fmt.Sprintf("unknown configurator %q", p.Configurator)}
}

func (a *Applier) checkReachable(ctx context.Context, reachable func(context.Context) error) error {
	if reachable == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.checkpointTimeout()/2)
	defer cancel()
	if err := reachable(ctx); err != nil {
		return fmt.Errorf("registration server not reachable after the change: %w", err)
	}
	return nil
}

func (a *Applier) applyNmstate(ctx context.Context, p *Plan, reachable func(context.Context) error) error {
	nmstatectl, err := host.Lookup("nmstatectl", a.tools().Nmstatectl)
	if err != nil {
		return fmt.Errorf("apply network live (nmstate): %w", err)
	}
	cmds := nmstateCommands(nmstatectl, a.timeoutArg(), p.Digested)
	apply, commit := cmds[0], cmds[1]
	log := a.log().WithField("configurator", p.Configurator).WithField("generator", p.Generator)
	log.Info(p.GeneratorNote())
	prev, err := takeSnapshot(a.files(), a.persistTargets(p)...)
	if err != nil {
		return fmt.Errorf("apply network live (nmstate): %w", err)
	}
	undoDir := a.stateDirUndo()
	conv, err := a.newConvergence(ctx, p, log)
	if err != nil {
		return fmt.Errorf("apply network live (nmstate): %w", err)
	}
	back := func(step string, cause error, restoreFiles bool) error {
		// A fresh context: the caller's may be what just expired.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.checkpointTimeout())
		defer cancel()
		var errs []error
		if _, err := a.runNmstatectl(rctx, host.Command{Name: nmstatectl, Args: []string{"rollback"}}); err != nil {
			if step == "nmstatectl apply" {
				// A failed apply rolls its own checkpoint back, so there
				// may be nothing left to roll back; a killed one leaves
				// the checkpoint, which this call then removes.
				log.WithError(err).Debug("rollback after a failed apply")
			} else {
				errs = append(errs, err)
			}
		}
		if restoreFiles {
			errs = append(errs, prev.restore(a.files()), undoDir())
		}
		if conv != nil {
			// After NetworkManager's own rollback, which rewrites the
			// profiles it restores in its format and under names of its
			// choosing: the previous bytes back.
			errs = append(errs, conv.undo(rctx))
		}
		log.WithError(cause).WithField("step", step).Warn("network change rolled back")
		return &LiveApplyError{Step: step, Err: cause, RollbackErr: errors.Join(errs...)}
	}
	// The intent goes before NetworkManager writes the keyfiles
	// (docs/apply.md, "Crash consistency"); a way back restores the
	// manifest without it.
	if err := a.writeIntent(p); err != nil {
		return back("recording the change", err, true)
	}
	log.Info("applying network config with a checkpoint")
	if _, err := a.runNmstatectl(ctx, apply); err != nil {
		return back("nmstatectl apply", err, true)
	}
	if conv != nil {
		// Within the checkpoint: the profiles become the plan's keyfiles,
		// which the next boot brings, before the check tests them.
		if step, err := conv.converge(ctx); err != nil {
			return back(step, err, true)
		}
	} else if nmcli, err := host.Lookup("nmcli", a.tools().Nmcli); err == nil {
		// As the next boot will have it (live_boot.go).
		if step, err := a.downTransient(ctx, nmcli); err != nil {
			return back(step, err, false)
		}
	}
	if err := a.checkReachable(ctx, reachable); err != nil {
		return back("reachability check", err, true)
	}
	if err := a.Persist(p); err != nil {
		return back("persist", err, true)
	}
	if _, err := a.runNmstatectl(ctx, commit); err != nil {
		return back("nmstatectl commit", err, true)
	}
	log.Info("network config committed")
	return nil
}
