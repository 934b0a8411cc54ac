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

// The phases; phaseList puts them in order.
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

// stage is one entry of phaseList: the phase, the modes it runs in, and
// its call: the phase's function with the hand-offs of earlier phases as
// arguments, its product stored in the one hand-off it fills. failed, if
// set, sees the phase's error before the run ends with it.
type stage struct {
	phase  Phase
	modes  func(Mode) bool
	call   func(ctx context.Context, e *env, ph *phase, h *handoffs) error
	failed func(ctx context.Context, e *env, h *handoffs, p Phase, err error) error
}

func always(Mode) bool      { return true }
func atBoot(m Mode) bool    { return m == ModeBoot }
func notAtBoot(m Mode) bool { return m != ModeBoot }

// phaseList is the run, in order: what each phase takes (the arguments,
// hand-offs of earlier phases) and what it hands on (the one field of
// handoffs it sets). Run executes it and Phases lists it
// (docs/architecture.md quotes it).
var phaseList = []stage{
	{phase: PhaseConfig, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.conf, err = e.loadConfig(ctx, ph)
		return err
	}},
	{phase: PhaseState, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.prior, err = e.readState(ph)
		return err
	}},
	{phase: PhaseIdentity, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.id, err = e.identify(ph, h.conf, h.prior)
		return err
	}},
	{phase: PhaseBootstrap, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.bootNet, err = e.bootstrapNetwork(ctx, ph, h.conf, h.prior)
		return err
	}},
	{phase: PhaseRegister, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.reg, err = e.register(ctx, ph, h.conf, h.id)
		return err
	}},
	{phase: PhaseFetchNetwork, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.fetched, err = e.fetchNetwork(ctx, ph, h.conf, h.id, h.reg)
		return err
	}},
	{phase: PhasePlan, modes: always, failed: networkFailed, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.plan, err = e.plan(ctx, ph, h.conf, h.fetched.reg.state, h.fetched.net, e.handsOver(h.fetched.reg.cfg))
		return err
	}},
	{phase: PhaseApply, modes: atBoot, failed: networkFailed, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		f := h.fetched
		h.out, err = e.applyPlan(e, ctx, ph, applyInput{conf: h.conf, reg: h.conf.cfg.Elemental.Registration, state: f.reg.state, net: f.net, plan: h.plan, bootNet: h.bootNet})
		return err
	}},
	{phase: PhaseHandOver, modes: notAtBoot, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.out, err = e.handOver(ctx, ph, h.conf, h.fetched, h.plan)
		return err
	}},
	{phase: PhaseFinish, modes: always, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) error {
		return e.finish(h.out.state, h.id)
	}},
}

// Phases is the ordered list of phases a run in mode m goes through:
// phaseList's, as Run executes them.
func Phases(m Mode) []Phase {
	var out []Phase
	for _, s := range phaseList {
		if s.modes(m) {
			out = append(out, s.phase)
		}
	}
	return out
}

// runPhases executes phaseList for the run's mode; the first failure ends
// the run.
func (e *env) runPhases(ctx context.Context, h *handoffs) error {
	for _, s := range phaseList {
		if !s.modes(e.o.Mode) {
			continue
		}
		err := e.do(ctx, s.phase, func(ctx context.Context, ph *phase) error { return s.call(ctx, e, ph, h) })
		if err != nil && s.failed != nil {
			err = s.failed(ctx, e, h, s.phase, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
func (e *env) phase(p Phase) *phase { return &phase{name: p, log: e.log.WithField("phase", p)} }

// do runs one phase with its start and end lines and STATUS; a failure is
// returned as a *PhaseError naming it, and so is a stop by a signal (the
// run's context cancelled with an *exitcode.StoppedError as its cause).
func (e *env) do(ctx context.Context, p Phase, fn func(context.Context, *phase) error) error {
	ph := e.phase(p)
	log := ph.log
	// The result line says what matters; the start is for --debug.
	log.Debug("[started]")
	e.notify.Status(string(p), "started")
	start := time.Now()
	err := fn(ctx, ph)
	d := time.Since(start).Round(time.Microsecond)
	var stopped *exitcode.StoppedError
	if cause := context.Cause(ctx); err != nil && errors.As(cause, &stopped) {
		// Stopped on request (SIGINT/SIGTERM): not a failure of the phase;
		// the cancellation errors it caused say nothing more.
		log.WithField("duration", d).Warn("[stopped]")
		e.notify.Status(string(p), stopped.Error())
		return &PhaseError{Phase: p, Err: stopped}
	}
	if err != nil {
		log.WithField("duration", d).WithError(err).Error("[failed]")
		e.notify.Status(string(p), "failed: "+err.Error())
		return &PhaseError{Phase: p, Err: err}
	}
	log.WithField("duration", d).Info("[finished]")
	return nil
}
