package agent

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
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
// arguments, its product stored in the one hand-off it fills. saves, if
// set, is the state the product says to save (nil: none), which the runner
// writes when the call returns, failed or not; then, if set, runs after
// that save. failed, if set, is told of the phase's error with the values
// it reports, and returns the state to save (nil: none).
type stage struct {
	phase  Phase
	modes  func(Mode) bool
	call   func(ctx context.Context, e *env, ph *phase, h *handoffs) error
	saves  func(h *handoffs) *state.State
	then   func(ctx context.Context, e *env, ph *phase, h *handoffs) error
	failed func(ctx context.Context, e *env, p Phase, err error, h *handoffs) *state.State
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
	{phase: PhaseIdentity, modes: always, saves: seedToSave, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
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
	{phase: PhasePlan, modes: always, failed: networkFailedIn, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.plan, err = e.plan(ctx, ph, h.conf, h.fetched.reg.state, h.fetched.net, e.handsOver(h.fetched.reg.cfg))
		return err
	}},
	{phase: PhaseApply, modes: atBoot, failed: networkFailedIn, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		f := h.fetched
		h.out, err = e.applyPlan(e, ctx, ph, applyInput{conf: h.conf, reg: h.conf.cfg.Elemental.Registration, state: f.reg.state, net: f.net, plan: h.plan, bootNet: h.bootNet})
		return err
	}},
	{phase: PhaseHandOver, modes: notAtBoot, saves: handOverToSave, then: runToolkit, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) (err error) {
		h.out, err = e.handOver(ctx, ph, h.conf, h.fetched, h.plan)
		return err
	}},
	{phase: PhaseFinish, modes: always, saves: finalToSave, then: ready, call: func(ctx context.Context, e *env, ph *phase, h *handoffs) error {
		h.final = finalState(h.out.state, h.id)
		return nil
	}},
}

// The states the products say to save, and what runs once they are saved.
func seedToSave(h *handoffs) *state.State {
	if h.id == nil || !h.id.seedDrawn {
		return nil
	}
	return &h.id.state
}

func handOverToSave(h *handoffs) *state.State {
	if h.out == nil || h.out.toolkit == nil {
		return nil
	}
	return &h.out.state
}

func finalToSave(h *handoffs) *state.State { return h.final }

func runToolkit(ctx context.Context, _ *env, _ *phase, h *handoffs) error {
	if h.out.toolkit == nil {
		return nil
	}
	return h.out.toolkit.Run(ctx)
}

func ready(_ context.Context, e *env, _ *phase, _ *handoffs) error {
	e.notify.Ready()
	return nil
}

// networkFailedIn is networkFailed with the values it reports.
func networkFailedIn(ctx context.Context, e *env, p Phase, err error, h *handoffs) *state.State {
	return networkFailed(ctx, e, p, err, h.fetched.net, withAK(h.fetched.reg.state, h.id))
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
// the run. Each phase's edges and logger are made here (env.phase), from
// the secrets the products so far carry.
func (e *env) runPhases(ctx context.Context, h *handoffs) error {
	for _, s := range phaseList {
		if !s.modes(e.o.Mode) {
			continue
		}
		ph := e.phase(s.phase, h.secrets())
		err := e.do(ctx, ph, func(ctx context.Context) error { return e.runStage(ctx, s, ph, h) })
		if err != nil && s.failed != nil {
			if st := s.failed(ctx, e, s.phase, err, h); st != nil {
				if sErr := e.saveState(ph, *st); sErr != nil {
					ph.log.WithError(sErr).Warn("the network error could not be kept in the state file")
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runStage is one stage's call, the save of the state its product says to
// save, then its then.
func (e *env) runStage(ctx context.Context, s stage, ph *phase, h *handoffs) error {
	err := s.call(ctx, e, ph, h)
	if s.saves != nil {
		if st := s.saves(h); st != nil {
			if sErr := e.saveState(ph, *st); sErr != nil && err == nil {
				err = sErr
			}
		}
	}
	if err != nil || s.then == nil {
		return err
	}
	return s.then(ctx, e, ph, h)
}

// saveState is the one writer of the state file: the runner hands it the
// state a phase's product (or its failure hook) says to save, when the
// phase's call returns (docs/architecture.md).
func (e *env) saveState(ph *phase, st state.State) error {
	return st.Save(ph.files, e.o.StatePath)
}

// phase is what the runner hands one phase: its name (the STATUS prefix,
// the state file's nodereg-last-phase), its logger, tagged phase=<name>
// already, for every line the phase and what it calls log, and the host
// edge it writes through: the files, the runner and the output, printing
// in a dry run with the secrets known so far redacted.
type phase struct {
	name   Phase
	log    *logrus.Entry
	files  host.FS
	runner host.Runner
	out    io.Writer
}

// phase is p as the runner hands it over, with r the secrets its output
// must not show; the one place a logger is tagged with its phase.
func (e *env) phase(p Phase, r redactor) *phase {
	files, runner, out := e.edges(r)
	return &phase{name: p, log: e.log.WithField("phase", p), files: files, runner: runner, out: out}
}

// do runs one phase with its start and end lines and STATUS; a failure is
// returned as a *PhaseError naming it, and so is a stop by a signal (the
// run's context cancelled with an *exitcode.StoppedError as its cause).
func (e *env) do(ctx context.Context, ph *phase, fn func(context.Context) error) error {
	p, log := ph.name, ph.log
	// The result line says what matters; the start is for --debug.
	log.Debug("[started]")
	e.notify.Status(string(p), "started")
	start := e.o.Clock.Now()
	err := fn(ctx)
	d := e.o.Clock.Now().Sub(start).Round(time.Microsecond)
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
