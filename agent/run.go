package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/tpm"
)

// Notifier receives progress for the service manager (package systemd).
type Notifier interface {
	Status(phase, detail string)
	// RetryHook is a retry.Policy.OnWait that extends the start timeout
	// by each wait plus margin and says in STATUS why it waits.
	RetryHook(phase string, margin time.Duration) func(attempt int, d time.Duration, err error)
	Ready()
}

type nopNotifier struct{}

func (nopNotifier) Status(string, string) {}
func (nopNotifier) RetryHook(string, time.Duration) func(int, time.Duration, error) {
	return func(int, time.Duration, error) {}
}
func (nopNotifier) Ready() {}

// Options are everything a run needs; cmd/agent fills them from flags.
type Options struct {
	// Mode: boot (default), reset or install.
	Mode             Mode
	Debug            bool // passed on to the toolkit
	DisableBootEntry bool
	Root             string
	ConfigPath       string
	StatePath        string
	Overrides        localconfig.Overrides
	Labels           []string
	LabelsFile       string
	// DryRun: the whole conversation and rendering, printed to Out;
	// nothing written or applied.
	DryRun bool
	// PersistOnly: write under Root but run no tool that changes the live
	// state of the host (nmstatectl apply/commit/rollback, nmcli, the
	// elemental toolkit). cmd/agent sets it for a --root other than /
	// without --apply-live, so a scratch root never reaches the host's
	// NetworkManager.
	PersistOnly bool
	// Deadline bounds the registration retries; NetworkTimeout bounds the
	// wait for addresses after registration. 0: no bound of their own.
	Deadline       time.Duration
	NetworkTimeout time.Duration
	// SessionDeadline bounds one websocket conversation (default 10 s).
	SessionDeadline time.Duration
	// ReachabilityWindow bounds the check, after a live apply, that the
	// registration server still answers over the new network; past it the
	// change is rolled back (default DefaultReachabilityWindow).
	ReachabilityWindow time.Duration
	// RepairDrift: the update run (nodereg-update.service): when the
	// server's config is the applied one, compare the live network with
	// it and apply it again if it drifted (docs/verify.md).
	RepairDrift bool
	// LockWait bounds the wait for the state lock another run holds
	// (default DefaultLockWait); past it the run ends with exit 75.
	LockWait time.Duration
	Version  string
	Out      io.Writer
	Log      *logrus.Entry
	Notifier Notifier
	Clock    retry.Clock
	Runner   host.Runner
}

// env is a run's environment, fixed when it starts (newEnv) and read
// only after: the options (the clock among them, never nil), the logger,
// the notifier, the host's files below --root and the runner (notLive
// under a scratch root), the tool table and the other environment
// variables a run reads, and the apply phase's work chosen with them.
// Nothing of it changes during the run: what spans the phases is each
// phase's product (handoffs), the secrets a dry run must not print among
// them, and each phase gets its own edges made from those (env.phase).
type env struct {
	o      Options
	log    *logrus.Entry
	notify Notifier
	// root is the host's files below --root: read through it anywhere; a
	// phase writes through its phase.files (printing in a dry run).
	root host.Root
	// devices is the machine's devices, which the TPM is opened through:
	// a tpm-device names the device as it is on the machine the agent
	// runs on, whatever --root says.
	devices host.FS
	runner  host.Runner
	tools   host.Tools
	// probeInterval is bootstrap.ProbeIntervalEnv's value, read with the
	// tool table.
	probeInterval string
	// applyPlan is PhaseApply's work: applyLive, printPlan in a dry run,
	// persistPlan under a scratch root.
	applyPlan func(*env, context.Context, *phase, applyInput) (*outcome, error)
}

// Result is what a run did, for the caller's summary and for tests.
type Result struct {
	// Registered: the server registered the machine in this run (the
	// final line says so even when a later phase failed).
	Registered bool
	// Updated: the run was a registration update (MsgUpdate).
	Updated bool
	// Configurator and Addresses of the network config; empty when the
	// server has none for this machine.
	Configurator string
	Addresses    map[string]string
	// Digest identifies the rendered network config.
	Digest string
	// Applied: the config was persisted and applied in this run (false
	// when unchanged since the last run, or in a dry run).
	Applied bool
	// TPMHash is the identity with auth tpm; TPM counts this run's TPM
	// commands and key creations.
	TPMHash string
	TPM     tpm.Counts
}

// Run is one run through phaseList (Phases(o.Mode)): register or update,
// get the network config, plan it, then apply it (boot) or hand it to the
// toolkit (install, reset), and save the state.
func Run(ctx context.Context, o Options) (*Result, error) {
	e := newEnv(o)
	var h handoffs
	res := &Result{}
	defer e.close(&h, res)
	unlock, err := e.lock(ctx)
	if err != nil {
		return res, err
	}
	defer unlock()
	err = e.runPhases(ctx, &h)
	*res = h.result()
	if o.DryRun {
		fmt.Fprintln(e.o.Out, "# dry run: nothing written, nothing applied")
	}
	return res, err
}

// newEnv fixes the run's environment: the options' defaults, the edges
// and the apply phase's work for a dry run or a scratch root, and the
// process environment, read here once (the tool table, the bootstrap
// probe interval).
func newEnv(o Options) *env {
	o.Log = logx.OrDiscard(o.Log)
	if o.Notifier == nil {
		o.Notifier = nopNotifier{}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Root == "" {
		o.Root = "/"
	}
	if o.ConfigPath == "" {
		o.ConfigPath = host.ConfigFile
	}
	if o.StatePath == "" {
		o.StatePath = host.StateFile
	}
	if o.LabelsFile == "" {
		o.LabelsFile = host.LabelsFile
	}
	if o.Runner == nil {
		o.Runner = host.ExecRunner{}
	}
	if o.Clock == nil {
		o.Clock = retry.SystemClock{}
	}
	notify, runner, applyPlan := o.Notifier, o.Runner, (*env).applyLive
	switch {
	case o.DryRun:
		// A dry run is the same run with printing edges (env.phase):
		// files and commands that change the host are printed, read-only
		// commands run, systemd is not told, and the plan is printed, not
		// applied.
		notify, applyPlan = nopNotifier{}, (*env).printPlan
	case o.PersistOnly:
		// A scratch root: files are written under it, nothing reaches the
		// host's live network or its toolkit.
		log := o.Log
		runner = host.NotLive{Real: o.Runner, Say: func(c host.Command) {
			log.Warnf("not running %s: --root is not / (--apply-live runs it)", c)
		}}
		applyPlan = (*env).persistPlan
	}
	return &env{
		o: o, log: o.Log, notify: notify, root: host.Root(o.Root), devices: host.Root("/"), runner: runner,
		tools: host.ToolsFromEnv(os.LookupEnv), probeInterval: os.Getenv(bootstrap.ProbeIntervalEnv),
		applyPlan: applyPlan,
	}
}

// edges are the host edge one phase writes through: the files, the runner
// and the output, printing in a dry run with the secrets known so far
// redacted (r, learnt from the products of the phases before).
func (e *env) edges(r redactor) (host.FS, host.Runner, io.Writer) {
	if !e.o.DryRun {
		return e.root, e.runner, e.o.Out
	}
	out := redactingWriter{w: e.o.Out, s: r}
	return host.Print{Root: e.root, W: out}, host.PrintRunner{W: out, Real: e.runner}, out
}

// DefaultLockWait is how long a run waits for another to release the state
// lock: a registration update or an admin's reset-network is over in
// seconds; a boot run stuck longer than this is better retried by systemd.
const DefaultLockWait = 30 * time.Second

// close ends what the run's products hold open: the inventory collection
// and the TPM, whose counts go into res.
func (e *env) close(h *handoffs, res *Result) {
	if h.conf != nil {
		h.conf.inv.stop()
	}
	if h.id == nil || h.id.tpm == nil {
		return
	}
	if err := h.id.tpm.Close(); err != nil {
		e.log.WithError(err).Warn("closing the TPM")
	}
	// After Close, so the final flushes are counted too.
	res.TPM = h.id.tpm.Counts()
}
