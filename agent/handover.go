package agent

import (
	"context"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/handover"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
)

// Mode selects what a run does with the network config once planned.
type Mode int

const (
	// ModeBoot applies it live and persists it (the boot service).
	ModeBoot Mode = iota
	// ModeReset hands it, with the registration, to `elemental reset`
	// through the before-reset hook (recovery).
	ModeReset
	// ModeInstall does the same for `elemental install` (live media).
	ModeInstall
)

// handOver is PhaseHandOver: the network config's state goes into the
// state file, and package handover writes the before-install/reset hook
// (registration, state, applicator) and runs the toolkit.
func (r *run) handOver(ctx context.Context, ph *phase, net *fetched, plan *apply.Plan) error {
	verb := "reset"
	if r.o.Mode == ModeInstall {
		verb = "install"
	}
	agentFiles, agentErr := handover.SystemAgentFiles(r.cfg, r.caCert())
	if r.o.Mode == ModeInstall && r.cfg.Elemental.Registration.NoToolkit {
		if agentErr != nil {
			return agentErr
		}
		return agentFiles.Write(r.files)
	}
	elemental, err := lookupToolkit(verb)
	if err != nil {
		return err
	}
	if plan != nil {
		r.state.NetworkDigest = r.result.Digest
		r.state.NetworkState = netreport.StateReady
		r.state.NetworkAddresses = state.FormatAddresses(apply.InterfaceAddresses(net.rendered))
	}
	// Upstream saves the state before the toolkit runs; the new system
	// gets the same state through the hook.
	r.state.LastPhase = string(PhaseHandOver)
	reg, err := registrationYAML(r.cfg.Elemental.Registration, r.boot)
	if err != nil {
		return err
	}
	st, err := yaml.Marshal(r.state)
	if err != nil {
		return err
	}
	if agentErr != nil {
		return agentErr
	}
	return handover.Run(ctx, handover.Request{
		Reset: r.o.Mode == ModeReset, Elemental: elemental, Config: r.cfg,
		Registration: reg, State: st, SystemAgent: agentFiles, Plan: plan,
		SaveState: func() error { return r.state.Save(r.files, r.o.StatePath) },
		Files:     r.files, Runner: r.runner, Log: ph.log,
		Debug: r.o.Debug, DisableBootEntry: r.o.DisableBootEntry, PersistOnly: r.o.PersistOnly && !r.o.DryRun,
	})
}

// checkModeTools looks for the tools the mode needs before the run talks
// to the server (issue 21, item 9): a reset or install without the toolkit
// must not register again and claim new addresses first.
func (r *run) checkModeTools() error {
	if r.o.Mode == ModeBoot || (r.o.Mode == ModeInstall && r.cfg.Elemental.Registration.NoToolkit) {
		return nil
	}
	verb := map[Mode]string{ModeReset: "reset", ModeInstall: "install"}[r.o.Mode]
	_, err := lookupToolkit(verb)
	return err
}

// lookupToolkit finds the elemental toolkit the hand-over runs, in the
// host's tool table.
func lookupToolkit(verb string) (string, error) {
	elemental, err := host.Lookup("elemental", host.ToolsFromEnv(os.Getenv).Elemental)
	if err != nil {
		return "", &ConfigError{Err: fmt.Errorf("%s needs the elemental toolkit: %w", verb, err)}
	}
	return elemental, nil
}
