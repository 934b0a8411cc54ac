package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/devnode"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
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
	Overrides        Overrides
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

// env is what a run works with, fixed when it starts (newRun): the
// options (the clock among them), the logger, the notifier, the host edge
// (real, or printing in a dry run; notLive under a scratch root), the apply
// phase's work chosen with it, and the TPM once the identity phase opened
// it.
type env struct {
	o      Options
	log    *logrus.Entry
	notify Notifier
	files  host.FS
	runner host.Runner
	// applyPlan is PhaseApply's work: applyLive, printPlan in a dry run,
	// persistPlan under a scratch root.
	applyPlan func(context.Context, *phase, *fetched, *apply.Plan) error
	tpm       *tpm.TPM
}

// run is one run: its environment and the state that spans the phases;
// what one phase hands the next (the reply, the network config, the plan)
// is passed and returned instead.
type run struct {
	env
	cfg   *protocol.Config
	state *state.State
	auth  protocol.Authenticator
	inv   *pendingInventory
	// labels and annotations (but registration-ip) are what this run
	// sends; read once.
	labels      map[string]string
	annotations map[string]string
	result      Result
	// nmstate is the local choice of nmstate's keyfile generator; netPolicy
	// the local network-config policy (netpolicy).
	nmstate   apply.NmstateChoice
	netPolicy netpolicy.Policy
	// offline: the plan is for some other machine (agent render), so the
	// keyfile names are not checked against this host's keyfile directory.
	offline bool
	// boot is the local bootstrap network config (nil: none); bootNet the
	// bootstrap network this run brought up or took over (nil: none).
	boot    *bootstrap.Config
	bootNet *bootstrap.Network
	// appliedDigest is the state's network digest as read, before install
	// and reset forget it: whether a config of ours is applied here.
	appliedDigest string
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

// Run is one run through Phases(o.Mode): register or update, get the
// network config, plan it, then apply it (boot) or hand it to the toolkit
// (install, reset), and save the state.
func Run(ctx context.Context, o Options) (*Result, error) {
	r := newRun(o)
	defer r.close()
	unlock, err := r.lock(ctx)
	if err != nil {
		return &r.result, err
	}
	defer unlock()
	err = r.phases(ctx)
	if o.DryRun {
		fmt.Fprintln(r.o.Out, "# dry run: nothing written, nothing applied")
	}
	return &r.result, err
}

// phases is Phases(r.o.Mode) with what each phase needs and produces.
func (r *run) phases(ctx context.Context) error {
	for _, p := range []struct {
		phase Phase
		fn    func(context.Context, *phase) error
	}{{PhaseConfig, r.loadConfig}, {PhaseState, r.loadState}, {PhaseIdentity, r.identity}, {PhaseBootstrap, r.bootstrapNetwork}} {
		if err := r.do(ctx, p.phase, p.fn); err != nil {
			return err
		}
	}
	reply, err := step(ctx, r, PhaseRegister, r.register)
	if err != nil {
		return err
	}
	net, err := step(ctx, r, PhaseFetchNetwork, func(ctx context.Context, ph *phase) (*fetched, error) { return r.fetchNetwork(ctx, ph, reply) })
	if err != nil {
		return err
	}
	plan, err := step(ctx, r, PhasePlan, func(ctx context.Context, ph *phase) (*apply.Plan, error) { return r.plan(ctx, ph, net) })
	if err != nil {
		return r.networkFailed(ctx, PhasePlan, net, err)
	}
	if r.o.Mode == ModeBoot {
		if err = r.do(ctx, PhaseApply, func(ctx context.Context, ph *phase) error { return r.applyPlan(ctx, ph, net, plan) }); err != nil {
			return r.networkFailed(ctx, PhaseApply, net, err)
		}
	} else {
		err = r.do(ctx, PhaseHandOver, func(ctx context.Context, ph *phase) error { return r.handOver(ctx, ph, net, plan) })
	}
	if err != nil {
		return err
	}
	return r.do(ctx, PhaseFinish, r.finish)
}

func newRun(o Options) *run {
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
		o.ConfigPath = DefaultConfigPath
	}
	if o.StatePath == "" {
		o.StatePath = DefaultStatePath
	}
	if o.LabelsFile == "" {
		o.LabelsFile = DefaultLabelsFile
	}
	if o.Runner == nil {
		o.Runner = host.ExecRunner{}
	}
	r := &run{env: env{o: o, log: o.Log, notify: o.Notifier, files: host.Root(o.Root), runner: o.Runner}}
	r.applyPlan = r.applyLive
	if o.DryRun {
		// A dry run is the same run with printing edges: files and
		// commands that change the host are printed, read-only commands
		// run, systemd is not told, and the plan is printed, not applied.
		r.o.Out = redactingWriter{w: o.Out, r: r}
		r.files = host.Print{Root: host.Root(o.Root), W: r.o.Out}
		r.runner = host.PrintRunner{W: r.o.Out, Real: o.Runner}
		r.notify = nopNotifier{}
		r.applyPlan = r.printPlan
	}
	if o.PersistOnly && !o.DryRun {
		// A scratch root: files are written under it, nothing reaches the
		// host's live network or its toolkit (a dry run prints instead).
		r.runner = host.NotLive{Real: o.Runner, Say: func(c host.Command) {
			r.log.Warnf("not running %s: --root is not / (--apply-live runs it)", c)
		}}
		r.applyPlan = r.persistPlan
	}
	return r
}

// DefaultLockWait is how long a run waits for another to release the state
// lock: a registration update or an admin's reset-network is over in
// seconds; a boot run stuck longer than this is better retried by systemd.
const DefaultLockWait = 30 * time.Second

func (r *run) close() {
	r.inv.stop()
	if r.tpm != nil {
		if err := r.tpm.Close(); err != nil {
			r.log.WithError(err).Warn("closing the TPM")
		}
		// After Close, so the final flushes are counted too.
		r.result.TPM = r.tpm.Counts()
	}
}

func (r *run) path(p string) string { return r.files.Path(p) }

func (r *run) loadConfig(ctx context.Context, ph *phase) error {
	f, err := localconfig.Read(r.files, r.o.ConfigPath, r.o.Overrides, ph.log)
	if err != nil {
		return err
	}
	r.cfg, r.nmstate = f.Config, f.Nmstate
	if r.boot, err = f.Bootstrap(); err != nil {
		return err
	}
	if r.netPolicy, err = f.NetPolicy(); err != nil {
		return err
	}
	if err := r.checkModeTools(); err != nil {
		return err
	}
	reg := r.cfg.Elemental.Registration
	// Labels and the annotations that do not depend on the connection are
	// read once per run, not once per attempt.
	if r.labels, err = inventory.Labels(reg.Labels, r.path(r.o.LabelsFile), r.o.Labels); err != nil {
		return &ConfigError{Err: err}
	}
	r.annotations = inventory.Annotations(inventory.AnnotationOptions{
		Files: r.files, RegVersion: r.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit,
	})
	if !strings.HasPrefix(reg.URL, "https://") {
		r.log.WithField("url", protocol.RedactURL(reg.URL)).Warn("registration URL is plain http: the conversation is neither encrypted nor authenticated")
	}
	// The inventory needs nothing from the server: collect it while the
	// TPM and the connection are being set up; PhaseRegister sends it.
	r.inv = collectInventory(ctx, inventory.Options{
		Files: r.files, NoSMBIOS: reg.NoSMBIOS,
		// The wait for it happens inside a connection's session, so it
		// gets half a session at most; a slow module is left out.
		Deadline: protocol.DefaultSessionDeadline / 2,
		Log:      r.log.WithField("phase", PhaseRegister).WithField("step", "inventory"),
	})
	return nil
}

func (r *run) loadState(ctx context.Context, ph *phase) error {
	st, note, err := loadState(r.files, r.o.StatePath)
	if err != nil {
		return err
	}
	switch {
	case note == state.NoteFirstRegistration:
		// Every machine's first boot: nothing to warn about.
		ph.log.Info(note)
	case note != "":
		ph.log.Warn(note)
	}
	if st.LastPhase != "" && st.LastPhase != string(PhaseFinish) {
		// Saved at the hand-over: this is the first run after an install
		// or a reset, or the toolkit did not come back.
		ph.log.WithField("last-phase", st.LastPhase).Info("the previous run ended at its hand-over to the toolkit")
	}
	r.appliedDigest = st.NetworkDigest
	if r.o.Mode != ModeBoot {
		// Install and reset register as new (upstream starts from an empty
		// state); the TPM's cached AK and emulated seed are identity, kept.
		st.InitialRegistration = time.Time{}
		st.NetworkDigest, st.NetworkState, st.NetworkAddresses = "", "", ""
	}
	r.state = st
	return nil
}

func (r *run) identity(ctx context.Context, ph *phase) error {
	reg := r.cfg.Elemental.Registration
	switch reg.Auth {
	case authMAC:
		mac, err := inventory.MACAddress(r.files)
		if err != nil {
			return configErr("auth mac: %w", err)
		}
		r.auth = protocol.Plain{AuthKind: kind(reg, authMAC), ID: mac}
		plainIdentity(ph, authMAC, mac)
	case authSysUUID:
		id, err := inventory.SystemUUID(r.files)
		if err != nil {
			return configErr("auth sys-uuid: %w", err)
		}
		r.auth = protocol.Plain{AuthKind: kind(reg, authSysUUID), ID: id}
		plainIdentity(ph, authSysUUID, id)
	case authTPM:
		return r.openTPM(ph.log)
	}
	return nil
}

// plainIdentity logs what a PLAIN run sends, as the TPM's hash is logged:
// the MAC or UUID, and the machine hash the server's log lines name.
func plainIdentity(ph *phase, auth, id string) {
	ph.log.WithFields(logrus.Fields{auth: id, "machine": protocol.PlainHash(id)}).Info("PLAIN identity")
}

// kind is the auth annotation: upstream says emulated-tpm whenever
// emulation is on, whatever the auth (docs/protocol.md §4.2).
func kind(reg protocol.Registration, k string) string {
	if reg.EmulateTPM {
		return "emulated-tpm"
	}
	return k
}

func (r *run) openTPM(log *logrus.Entry) error {
	reg := r.cfg.Elemental.Registration
	opts := tpm.Options{Device: reg.TPMDevice, AKBlob: r.state.AKBlob(), Log: log,
		// A dry run writes nothing on the node, and a scratch root is not
		// this machine's install: neither may make keys persistent in the
		// machine's TPM.
		NoPersist: r.o.DryRun || r.o.PersistOnly,
	}
	if reg.EmulateTPM {
		uuid, _ := inventory.SystemUUID(r.files)
		opts.Emulate = true
		fresh := !r.state.EmulatedTPM
		opts.Seed = tpm.ResolveSeed(true, reg.EmulatedTPMSeed, r.state.EmulatedTPM, r.state.EmulatedTPMSeed, uuid)
		r.state.EmulatedTPM, r.state.EmulatedTPMSeed = true, opts.Seed
		if fresh && !r.o.DryRun {
			// The seed is the emulated TPM's identity, maybe drawn at
			// random: on disk before the server hears of it, so a power
			// cut before the run's end cannot make the next boot draw
			// another, a second inventory (docs/apply.md, crash consistency).
			if err := r.state.Save(r.files, r.o.StatePath); err != nil {
				return err
			}
		}
	} else {
		r.state.EmulatedTPM = false
		// A disk named as TPM would get TPM commands written into it.
		if err := devnode.CheckTPM(reg.TPMDevice); err != nil {
			return &ConfigError{Err: err}
		}
	}
	t, err := tpm.Open(opts)
	if err != nil {
		// A TPM that is missing, or an emulation this binary lacks, needs
		// a person; a busy TPM may free up.
		if errors.Is(err, tpm.ErrEmulationNotBuilt) || errors.Is(err, tpm.ErrNoDevice) || errors.Is(err, tpm.ErrBadSeed) {
			return &ConfigError{Err: err}
		}
		return err
	}
	r.tpm = t
	r.auth = t.Authenticator()
	h, err := t.Hash()
	if err != nil {
		return err
	}
	r.result.TPMHash = h
	r.log.WithField("tpm-hash", h).Info("TPM identity")
	return nil
}

func (r *run) finish(ctx context.Context, _ *phase) error {
	if r.tpm != nil {
		r.state.SetAKBlob(r.tpm.AKBlob())
	}
	r.state.LastPhase = string(PhaseFinish)
	if err := r.state.Save(r.files, r.o.StatePath); err != nil {
		return err
	}
	r.notify.Ready()
	return nil
}
