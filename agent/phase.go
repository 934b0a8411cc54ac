package agent

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/exitcode"
)

// Phase names one step of a run. The same name is the phase= field of every
// log line, the prefix of the systemd STATUS, the state file's
// nodereg-last-phase and the PhaseError that ends a failed run.
type Phase string

// The phases, in the order a run goes through them (Phases).
const (
	// PhaseConfig reads the config file, the labels and the annotations,
	// and starts the hardware inventory in the background.
	PhaseConfig Phase = "config"
	// PhaseState reads the state file of the previous run.
	PhaseState Phase = "state"
	// PhaseIdentity opens the TPM (auth tpm) or reads the MAC or SMBIOS
	// UUID (auth mac, sys-uuid).
	PhaseIdentity Phase = "identity"
	// PhaseBootstrap brings up the local bootstrap network when the
	// server is not reachable as the node is and no network config of
	// ours is applied (docs/bootstrap.md); without a bootstrap config it
	// does nothing. A phase of its own, after identity (whose TPM work
	// needs no network) and right before register, which needs it.
	PhaseBootstrap Phase = "bootstrap"
	// PhaseRegister runs the registration conversation, with retries; the
	// inventory collected since PhaseConfig is sent here.
	PhaseRegister Phase = "register"
	// PhaseFetchNetwork gets a network config whose placeholders all hold
	// addresses, and renders it (validation, substitution).
	PhaseFetchNetwork Phase = "fetch-network"
	// PhasePlan computes the keyfiles, the yip applicator and the commands
	// (nmstatectl gc for nmstate), without side effects.
	PhasePlan Phase = "plan"
	// PhaseApply applies the plan live with a way back and persists it
	// (boot mode only).
	PhaseApply Phase = "apply"
	// PhaseHandOver writes the install/reset hook and runs the elemental
	// toolkit (install and reset modes, instead of PhaseApply).
	PhaseHandOver Phase = "hand-over"
	// PhaseFinish saves the state file and tells systemd the run is ready.
	PhaseFinish Phase = "finish"
)

// Phases is the ordered list of phases a run in mode m goes through.
func Phases(m Mode) []Phase {
	last := PhaseApply
	if m != ModeBoot {
		last = PhaseHandOver
	}
	return []Phase{PhaseConfig, PhaseState, PhaseIdentity, PhaseBootstrap, PhaseRegister, PhaseFetchNetwork, PhasePlan, last, PhaseFinish}
}

// phase is what the runner hands one phase: its name (the STATUS prefix,
// the state file's nodereg-last-phase) and its logger, tagged phase=<name>
// already, for every line the phase and what it calls log.
type phase struct {
	name Phase
	log  *logrus.Entry
}

// phase is p as the runner hands it over; the one place its logger is
// tagged.
func (r *run) phase(p Phase) *phase { return &phase{name: p, log: r.log.WithField("phase", p)} }

// do runs one phase with its start and end lines and STATUS; a failure is
// returned as a *PhaseError naming it, and so is a stop by a signal (the
// run's context cancelled with an *exitcode.StoppedError as its cause).
func (r *run) do(ctx context.Context, p Phase, fn func(context.Context, *phase) error) error {
	ph := r.phase(p)
	log := ph.log
	// The result line says what matters; the start is for --debug.
	log.Debug("[started]")
	r.notify.Status(string(p), "started")
	start := time.Now()
	err := fn(ctx, ph)
	d := time.Since(start).Round(time.Microsecond)
	var stopped *exitcode.StoppedError
	if cause := context.Cause(ctx); err != nil && errors.As(cause, &stopped) {
		// Stopped on request (SIGINT/SIGTERM): not a failure of the phase;
		// the cancellation errors it caused say nothing more.
		log.WithField("duration", d).Warn("[stopped]")
		r.notify.Status(string(p), stopped.Error())
		return &PhaseError{Phase: p, Err: stopped}
	}
	if err != nil {
		log.WithField("duration", d).WithError(err).Error("[failed]")
		r.notify.Status(string(p), "failed: "+err.Error())
		return &PhaseError{Phase: p, Err: err}
	}
	log.WithField("duration", d).Info("[finished]")
	return nil
}

// step is do for a phase that hands a value to the next one.
func step[T any](ctx context.Context, r *run, p Phase, fn func(context.Context, *phase) (T, error)) (T, error) {
	var out T
	err := r.do(ctx, p, func(ctx context.Context, ph *phase) error {
		var err error
		out, err = fn(ctx, ph)
		return err
	})
	return out, err
}
