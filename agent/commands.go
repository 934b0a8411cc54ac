package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// ResetNetwork removes the network config this agent wrote (the files in
// its manifest and the applicator, nothing else) and forgets its digest, so
// the next boot applies the server's config afresh. It says what it
// removed, or that there was nothing; a NetworkManager that cannot be
// reloaded is a warning (the files are gone, which is what was asked).
func ResetNetwork(ctx context.Context, o Options) error {
	e := newEnv(o)
	unlock, err := e.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	ph := e.phase(PhaseApply, redactor{})
	log := ph.log
	removed, err := onPhase(e.ownedApplier("", netpolicy.Policy{}), ph).RemoveNetwork(ctx)
	if !o.DryRun {
		for _, p := range removed {
			log.WithField("path", p).Info("removed")
		}
	}
	var reload *apply.ReloadError
	switch {
	case errors.As(err, &reload):
		// NetworkManager catches up at its next reload or boot.
		log.WithError(reload.Err).Warn("network config removed, but NetworkManager was not reloaded")
	case err != nil:
		return &PhaseError{Phase: PhaseApply, Err: err}
	case len(removed) == 0 && o.DryRun:
		fmt.Fprintln(e.o.Out, "# nothing to remove")
	case o.DryRun:
		// The printing edges listed what would go.
	case len(removed) == 0:
		log.Info("reset network: nothing to remove")
	default:
		log.WithField("files", len(removed)).Info("reset network: network config removed")
	}
	st, note, err := loadState(ph.files, e.o.StatePath)
	if err != nil {
		return &PhaseError{Phase: PhaseState, Err: err}
	}
	if note != "" || st.NetworkDigest == "" {
		return nil
	}
	st.NetworkDigest, st.NetworkState, st.NetworkAddresses = "", "", ""
	if err := e.saveState(ph, *st); err != nil {
		return &PhaseError{Phase: PhaseState, Err: err}
	}
	return nil
}

// DumpInventory collects the inventory, labels and annotations the agent
// would send and returns them as JSON, with no secret in it (upstream's
// dumpdata).
func DumpInventory(ctx context.Context, o Options) ([]byte, error) {
	e := newEnv(o)
	var cfg *protocol.Config
	f, err := localconfig.Read(e.root, e.o.ConfigPath, e.o.Overrides, e.log)
	if err == nil {
		cfg = f.Config
	}
	if _, statErr := e.root.Stat(e.o.ConfigPath); errors.Is(statErr, fs.ErrNotExist) {
		// No config on this machine (yet): nothing to say.
		cfg, err = &protocol.Config{}, nil
	}
	if err != nil {
		// The inventory does not need a server: dump without the config,
		// saying what is left out.
		e.log.WithError(err).Warn("config not read: its labels are left out")
		cfg = &protocol.Config{}
	}
	inv, err := inventory.Collect(ctx, inventory.Options{Files: e.root, Log: e.log, Runner: e.runner,
		Dmidecode: e.tools.Dmidecode, NoDmidecode: e.tools.NoDmidecode})
	if err != nil {
		return nil, err
	}
	labels, err := inventory.Labels(e.root, cfg.Elemental.Registration.Labels, e.o.LabelsFile, e.o.Labels)
	if err != nil {
		return nil, &errclass.ConfigError{Err: err}
	}
	reg := cfg.Elemental.Registration
	ann := inventory.Annotations(inventory.AnnotationOptions{Files: e.root, RegVersion: e.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit})
	return inventory.Dump(inv, labels, ann)
}
