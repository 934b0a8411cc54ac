package agent

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/protocol"
)

// formatAddresses is the report-back annotation value:
// "eth0=10.0.0.5/24,fd00::5/64;eth1=…", sorted.
func formatAddresses(m map[string][]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strings.Join(m[k], ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// ResetNetwork removes the network config this agent wrote (the files in
// its manifest and the applicator, nothing else) and forgets its digest, so
// the next boot applies the server's config afresh.
func ResetNetwork(ctx context.Context, o Options) error {
	r := newRun(o)
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := r.applier(PhaseApply).ResetNetwork(ctx); err != nil {
		return &PhaseError{Phase: PhaseApply, Err: err}
	}
	statePath := r.path(r.o.StatePath)
	st, note, err := LoadState(statePath)
	if err != nil {
		return &PhaseError{Phase: PhaseState, Err: err}
	}
	if note != "" || st.NetworkDigest == "" {
		return nil
	}
	st.NetworkDigest, st.NetworkState, st.NetworkAddresses = "", "", ""
	if err := st.Save(r.files, statePath); err != nil {
		return &PhaseError{Phase: PhaseState, Err: err}
	}
	return nil
}

// DumpInventory collects the inventory, labels and annotations the agent
// would send and returns them as JSON, with no secret in it (upstream's
// dumpdata).
func DumpInventory(ctx context.Context, o Options) ([]byte, error) {
	r := newRun(o)
	cfg, err := LoadConfig(r.path(r.o.ConfigPath), r.o.Overrides)
	if err != nil {
		// The inventory does not need a server: dump without the config.
		cfg = &protocol.Config{}
	}
	inv, err := inventory.Collect(ctx, inventory.Options{Root: r.o.Root, Log: r.log})
	if err != nil {
		return nil, err
	}
	labels, err := inventory.Labels(cfg.Elemental.Registration.Labels, r.path(r.o.LabelsFile), r.o.Labels)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	reg := cfg.Elemental.Registration
	ann := inventory.Annotations(inventory.AnnotationOptions{Root: r.o.Root, RegVersion: r.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit})
	return inventory.Dump(inv, labels, ann)
}
