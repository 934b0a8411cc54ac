package agent

import (
	"context"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/handover"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/protocol"
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
// state the outcome carries, and package handover writes the
// before-install/reset hook (registration, state, applicator); the
// outcome's toolkit runs once the runner has saved that state.
func (e *env) handOver(ctx context.Context, ph *phase, c *configured, f *fetched, plan *apply.Plan) (*outcome, error) {
	cfg, st := f.reg.cfg, f.reg.state
	verb := "reset"
	if e.o.Mode == ModeInstall {
		verb = "install"
	}
	ca, err := e.trustedCA(ph, cfg.Elemental.Registration)
	if err != nil {
		return nil, err
	}
	agentFiles, agentErr := handover.SystemAgentFiles(cfg, ca)
	if e.o.Mode == ModeInstall && cfg.Elemental.Registration.NoToolkit {
		if agentErr != nil {
			return nil, agentErr
		}
		return &outcome{state: st}, agentFiles.Write(ph.files)
	}
	elemental, err := e.lookupToolkit(verb)
	if err != nil {
		return nil, err
	}
	if plan != nil {
		st.NetworkDigest = f.net.rendered.Digest()
		st.NetworkState = netreport.StateReady
		st.NetworkAddresses = state.FormatAddresses(apply.InterfaceAddresses(f.net.rendered))
	}
	// Upstream saves the state before the toolkit runs; the new system
	// gets the same state through the hook.
	st.LastPhase = string(PhaseHandOver)
	reg, err := registrationYAML(cfg.Elemental.Registration, c.boot)
	if err != nil {
		return nil, err
	}
	stYAML, err := yaml.Marshal(&st)
	if err != nil {
		return nil, err
	}
	if agentErr != nil {
		return nil, agentErr
	}
	toolkit, err := handover.Prepare(handover.Request{
		Reset: e.o.Mode == ModeReset, Elemental: elemental, Config: cfg,
		Registration: reg, State: stYAML, SystemAgent: agentFiles, Plan: plan,
		Files: ph.files, Runner: ph.runner, Log: ph.log,
		Debug: e.o.Debug, DisableBootEntry: e.o.DisableBootEntry, PersistOnly: e.o.PersistOnly && !e.o.DryRun,
	})
	if err != nil {
		return nil, err
	}
	return &outcome{state: st, toolkit: toolkit}, nil
}

// handsOver says whether the run's plan goes to the toolkit, to be
// brought up by a boot that no reachability check precedes: a reset, or an
// install that runs the toolkit (cfg, the merged config, as handOver reads
// it).
func (e *env) handsOver(cfg *protocol.Config) bool {
	return e.o.Mode == ModeReset || (e.o.Mode == ModeInstall && !cfg.Elemental.Registration.NoToolkit)
}

// checkModeTools looks for the tools the mode needs before the run talks
// to the server (docs/reliability.md, "Hostile server"): a reset or install without the
// toolkit must not register again and claim new addresses first.
func (e *env) checkModeTools(cfg *protocol.Config) error {
	if e.o.Mode == ModeBoot || (e.o.Mode == ModeInstall && cfg.Elemental.Registration.NoToolkit) {
		return nil
	}
	verb := map[Mode]string{ModeReset: "reset", ModeInstall: "install"}[e.o.Mode]
	_, err := e.lookupToolkit(verb)
	return err
}

// lookupToolkit finds the elemental toolkit the hand-over runs, in the
// host's tool table.
func (e *env) lookupToolkit(verb string) (string, error) {
	elemental, err := host.Lookup("elemental", e.tools.Elemental)
	if err != nil {
		return "", &errclass.ConfigError{Err: fmt.Errorf("%s needs the elemental toolkit: %w", verb, err)}
	}
	return elemental, nil
}
