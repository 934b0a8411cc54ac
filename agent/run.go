package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm"
)

// Phase names: in every log line and in the systemd STATUS.
const (
	PhaseConfig   = "config"
	PhaseState    = "state"
	PhaseIdentity = "identity"
	PhaseInv      = "inventory"
	PhaseRegister = "register"
	PhaseNetwork  = "network-config"
	PhaseRender   = "render"
	PhasePersist  = "persist"
	PhaseApply    = "apply"
	PhaseFinish   = "finish"
)

// Notifier receives progress for the service manager (package systemd).
type Notifier interface {
	Status(phase, detail string)
	Extend(d time.Duration)
	Ready()
}

type nopNotifier struct{}

func (nopNotifier) Status(string, string) {}
func (nopNotifier) Extend(time.Duration)  {}
func (nopNotifier) Ready()                {}

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
	Version         string
	Out             io.Writer
	Log             *logrus.Entry
	Notifier        Notifier
	Clock           retry.Clock
	Runner          apply.Runner
}

// phase is one step of a run, named in logs and in the systemd STATUS.
type phase struct {
	name string
	fn   func(context.Context) error
}

type run struct {
	o        Options
	log      *logrus.Entry
	notify   Notifier
	cfg      *protocol.Config
	state    *State
	tpm      *tpm.TPM
	auth     protocol.Authenticator
	inv      *inventory.Inventory
	invDone  chan struct{}
	invOnce  sync.Once
	reply    *protocol.Reply
	network  *protocol.NetworkConfig
	rendered *apply.Rendered
	plan     *apply.Plan
	result   Result
	// labels and annotations (but registration-ip) are what this run
	// sends; read once.
	labels      map[string]string
	annotations map[string]string
	// waiting: the run is asking again for addresses still pending.
	waiting bool
}

// Result is what a run did, for the caller's summary and for tests.
type Result struct {
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

// Run is one boot run: register or update, get the network config, render
// it, persist and apply it, save the state.
func Run(ctx context.Context, o Options) (*Result, error) {
	r := newRun(o)
	defer r.close()
	last := phase{PhasePersist, r.persist}
	if o.Mode != ModeBoot {
		last = phase{PhaseHandOver, r.handOver}
	}
	phases := []phase{
		{PhaseConfig, r.loadConfig},
		{PhaseState, r.loadState},
		{PhaseIdentity, r.identity},
		{PhaseRegister, r.register},
		{PhaseNetwork, r.networkConfig},
		{PhaseRender, r.render},
		last,
		{PhaseFinish, r.finish},
	}
	for _, p := range phases {
		if err := r.phase(ctx, p.name, p.fn); err != nil {
			return &r.result, err
		}
	}
	return &r.result, nil
}

func newRun(o Options) *run {
	if o.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		o.Log = logrus.NewEntry(l)
	}
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
	return &run{o: o, log: o.Log, notify: o.Notifier}
}

func (r *run) close() {
	if r.tpm != nil {
		if err := r.tpm.Close(); err != nil {
			r.log.WithError(err).Warn("closing the TPM")
		}
		// After Close, so the final flushes are counted too.
		r.result.TPM = r.tpm.Counts()
	}
}

// phase runs one phase with its start and end lines and STATUS.
func (r *run) phase(ctx context.Context, name string, fn func(context.Context) error) error {
	log := r.log.WithField("phase", name)
	// The result line says what matters; the start is for --debug.
	log.Debug("[started]")
	r.notify.Status(name, "started")
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start).Round(time.Microsecond)
	var stopped *exitcode.StoppedError
	if cause := context.Cause(ctx); err != nil && errors.As(cause, &stopped) {
		// Stopped on request (SIGINT/SIGTERM): not a failure of the phase;
		// the cancellation errors it caused say nothing more.
		log.WithField("duration", d).Warn("[stopped]")
		r.notify.Status(name, stopped.Error())
		return &PhaseError{Phase: name, Err: stopped}
	}
	if err != nil {
		log.WithField("duration", d).WithError(err).Error("[failed]")
		r.notify.Status(name, "failed: "+err.Error())
		return &PhaseError{Phase: name, Err: err}
	}
	log.WithField("duration", d).Info("[finished]")
	if r.state != nil {
		r.state.LastPhase = name
	}
	return nil
}

func (r *run) path(p string) string { return HostPath(r.o.Root, p) }

func (r *run) loadConfig(ctx context.Context) error {
	cfg, err := ReadConfig(r.o.Root, r.o.ConfigPath, r.o.Overrides, r.log.WithField("phase", PhaseConfig))
	if err != nil {
		return err
	}
	r.cfg = cfg
	reg := cfg.Elemental.Registration
	// Labels and the annotations that do not depend on the connection are
	// read once per run, not once per attempt.
	if r.labels, err = inventory.Labels(reg.Labels, r.path(r.o.LabelsFile), r.o.Labels); err != nil {
		return &ConfigError{Err: err}
	}
	r.annotations = inventory.Annotations(inventory.AnnotationOptions{
		Root: r.o.Root, RegVersion: r.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit,
	})
	if !strings.HasPrefix(reg.URL, "https://") {
		r.log.WithField("url", reg.URL).Warn("registration URL is plain http: the conversation is neither encrypted nor authenticated")
	}
	// The inventory needs nothing from the server: collect it while the
	// TPM and the connection are being set up.
	r.invDone = make(chan struct{})
	go func() {
		defer close(r.invDone)
		// The wait for it happens inside a connection's session, so it gets
		// half a session at most; a slow module is left out, not waited for.
		inv, err := inventory.Collect(ctx, inventory.Options{Root: r.o.Root, NoSMBIOS: reg.NoSMBIOS, Deadline: protocol.DefaultSessionDeadline / 2, Log: r.log.WithField("phase", PhaseInv)})
		if err != nil {
			r.log.WithError(err).Warn("hardware inventory unavailable: registering without it")
			inv = &inventory.Inventory{}
		}
		r.inv = inv
	}()
	return nil
}

func (r *run) loadState(ctx context.Context) error {
	st, note, err := LoadState(r.path(r.o.StatePath))
	if err != nil {
		return err
	}
	switch {
	case note == NoteFirstRegistration:
		// Every machine's first boot: nothing to warn about.
		r.log.WithField("phase", PhaseState).Info(note)
	case note != "":
		r.log.WithField("phase", PhaseState).Warn(note)
	}
	if r.o.Mode != ModeBoot {
		// Install and reset register as new (upstream starts from an empty
		// state); the TPM's cached AK and emulated seed are identity, kept.
		st.InitialRegistration = time.Time{}
		st.NetworkDigest, st.NetworkState, st.NetworkAddresses = "", "", ""
	}
	r.state = st
	return nil
}

func (r *run) identity(ctx context.Context) error {
	reg := r.cfg.Elemental.Registration
	switch reg.Auth {
	case authMAC:
		mac, err := inventory.MACAddress(r.o.Root)
		if err != nil {
			return configErr("auth mac: %w", err)
		}
		r.auth = protocol.Plain{AuthKind: kind(reg, authMAC), ID: mac}
	case authSysUUID:
		id, err := inventory.SystemUUID(r.o.Root)
		if err != nil {
			return configErr("auth sys-uuid: %w", err)
		}
		r.auth = protocol.Plain{AuthKind: kind(reg, authSysUUID), ID: id}
	case authTPM:
		return r.openTPM()
	}
	return nil
}

// kind is the auth annotation: upstream says emulated-tpm whenever
// emulation is on, whatever the auth (PROTOCOL.md 5.2).
func kind(reg protocol.Registration, k string) string {
	if reg.EmulateTPM {
		return "emulated-tpm"
	}
	return k
}

func (r *run) openTPM() error {
	reg := r.cfg.Elemental.Registration
	opts := tpm.Options{Device: reg.TPMDevice, AKBlob: r.state.AKBlob(), Log: r.log.WithField("phase", PhaseIdentity)}
	if reg.EmulateTPM {
		uuid, _ := inventory.SystemUUID(r.o.Root)
		opts.Emulate = true
		opts.Seed = tpm.ResolveSeed(true, reg.EmulatedTPMSeed, r.state.EmulatedTPM, r.state.EmulatedTPMSeed, uuid)
		r.state.EmulatedTPM, r.state.EmulatedTPMSeed = true, opts.Seed
	} else {
		r.state.EmulatedTPM = false
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

// awaitInventory waits for the collection started in the config phase.
// It is called once the connection is up, so collection overlaps the TPM
// work and the dial.
func (r *run) awaitInventory(ctx context.Context) error {
	select {
	case <-r.invDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.invOnce.Do(func() {
		if len(r.inv.Degraded) > 0 {
			r.log.WithField("phase", PhaseInv).WithField("families", strings.Join(r.inv.Degraded, ",")).Warn("inventory is partial")
		}
	})
	return nil
}

func (r *run) dialOptions() protocol.DialOptions {
	reg := r.cfg.Elemental.Registration
	// The upgrade gets no more time than a whole session: a server that
	// accepts TCP and never answers must not hold the run for gorilla's
	// default 45 s.
	session := r.o.SessionDeadline
	if session == 0 {
		session = protocol.DefaultSessionDeadline
	}
	return protocol.DialOptions{URL: reg.URL, CACert: r.caCert(), SessionDeadline: session, HandshakeTimeout: session}
}

// caCert is the CA as the dial reads it: a file named in the config or on
// the command line is read under --root.
func (r *run) caCert() string {
	ca := r.cfg.Elemental.Registration.CACert
	if p := CAPath(r.o.Root, ca); p != "" {
		return p
	}
	return ca
}

func (r *run) policy(deadline time.Duration, phase string) retry.Policy {
	return retry.Policy{
		Deadline: deadline,
		Clock:    r.o.Clock,
		Max:      30 * time.Second,
		OnWait: func(attempt int, d time.Duration, err error) {
			r.log.WithField("phase", phase).WithField("attempt", attempt).WithError(err).Warnf("retrying in %s", d.Round(time.Millisecond))
			r.notify.Status(phase, fmt.Sprintf("waiting %s after attempt %d: %v", d.Round(time.Second), attempt, err))
			// Keep systemd from timing the start out while we wait on
			// purpose; the margin covers the next attempt.
			r.notify.Extend(d + protocol.DefaultSessionDeadline + 5*time.Second)
		},
	}
}

// bound cuts an attempt still running past the retry deadline after at most
// one more session.
func (r *run) bound(ctx context.Context, deadline time.Duration) (context.Context, context.CancelFunc) {
	if deadline <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, deadline+r.dialOptions().SessionDeadline)
}

// register runs the registration conversation with retries.
func (r *run) register(ctx context.Context) error {
	ctx, cancel := r.bound(ctx, r.o.Deadline)
	defer cancel()
	return r.policy(r.o.Deadline, PhaseRegister).Do(ctx, "registration", func(ctx context.Context, attempt int) error {
		reply, err := r.registerOnce(ctx)
		if err != nil {
			return classifyRegister(err)
		}
		r.reply = reply
		return nil
	})
}

func (r *run) registerOnce(ctx context.Context) (*protocol.Reply, error) {
	reg := r.cfg.Elemental.Registration
	cc, err := protocol.Dial(ctx, r.dialOptions(), r.auth)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	log := r.log.WithField("phase", PhaseRegister)
	log.WithField("url", RedactURL(reg.URL)).WithField("auth", r.auth.Kind()).WithField("version", cc.Version).Debug("connected: authenticated, protocol version negotiated")
	if err := r.awaitInventory(ctx); err != nil {
		return nil, err
	}
	r.result.Updated = r.state.Registered()
	annotations := maps.Clone(r.annotations)
	if ip := cc.RegistrationIP(); ip != "" {
		annotations["registration-ip"] = ip
	}
	r.reportBack(annotations)
	payloads := &protocol.Payloads{
		Update:           r.state.Registered(),
		NoSMBIOS:         reg.NoSMBIOS,
		SMBIOS:           r.inv.SMBIOS,
		SystemDataV2:     r.inv.SystemDataV2,
		LegacySystemData: r.inv.LegacySystemData,
		Annotations:      annotations,
		Labels:           r.labels,
	}
	if payloads.SMBIOS == nil {
		payloads.SMBIOS = map[string]any{}
	}
	if payloads.SystemDataV2 == nil {
		payloads.SystemDataV2 = map[string]any{}
	}
	if payloads.Update {
		log.Debug("sending MsgUpdate (registered before), then MsgGet")
	} else {
		log.WithField("labels", len(payloads.Labels)).WithField("annotations", len(payloads.Annotations)).WithField("no-smbios", payloads.NoSMBIOS).
			Debug("sending MsgSmbios, MsgSystemData, MsgAnnotations, MsgLabels, then MsgGet")
	}
	// Decode onto a copy: a failed attempt must not half-change the config.
	cfg := *r.cfg
	reply, err := cc.Register(ctx, payloads, &cfg)
	if err != nil {
		return nil, err
	}
	got := log.WithField("explicit-network-config", reply.ExplicitNetworkConfig)
	if reply.Network != nil {
		got = got.WithField("configurator", reply.Network.Configurator).WithField("addresses", len(reply.Network.IPAddresses))
	}
	got.Debug("received MsgConfig")
	r.cfg = &cfg
	if r.state.InitialRegistration.IsZero() {
		r.state.InitialRegistration = time.Now().UTC()
	}
	return reply, nil
}

// classifyRegister marks failures no retry can fix as terminal, by the
// exit-code table (agent/exitcode), adding what the operator should do.
func classifyRegister(err error) error {
	var er *protocol.ErrorReply
	isReply := errors.As(err, &er)
	if isReply && (er.Reason == protocol.ReasonInventoryNotFound || strings.Contains(er.Message, "MachineInventory not found")) {
		return retry.Terminal(&ConfigError{Err: fmt.Errorf("the server has no inventory for this machine any more: re-provisioning needed (run `agent --reset` from recovery): %w", err)})
	}
	if exitcode.Of(err) == exitcode.Config {
		// A MsgError that is not about pending addresses is the server
		// refusing on purpose (inventory creation failed, template error):
		// asking again gives the same answer.
		if isReply {
			return retry.Terminal(fmt.Errorf("the server refused the registration: %w", err))
		}
		return retry.Terminal(err)
	}
	return classifyNetwork(err)
}

// networkConfig gets a network config that carries real addresses: from the
// registration reply, or by asking explicitly when the server announced it
// or the admin configured it (DESIGN.md "Asking for the network config").
func (r *run) networkConfig(ctx context.Context) error {
	mode := r.cfg.Elemental.Registration.NetworkConfig
	explicit := mode == networkModeExplicit || (mode == networkModeAuto && r.reply.ExplicitNetworkConfig)
	// A server that announced the explicit exchange only embeds a config
	// whose claims all hold addresses: an unresolved placeholder is then a
	// template error, not a pending claim.
	authoritative := r.reply.ExplicitNetworkConfig
	if !explicit && !r.reply.Network.IsReal() {
		r.log.WithField("phase", PhaseNetwork).Info("no network config for this machine (configurator none)")
		return nil
	}
	first := r.reply.Network
	log := r.log.WithField("phase", PhaseNetwork).WithField("mode", mode)
	switch {
	case first != nil && first.IsReal():
		log.Debug("network config: embedded in MsgConfig")
	case explicit && r.reply.ExplicitNetworkConfig:
		log.Debug("network config: asking with MsgNetworkConfig on a second connection (the server announced it)")
	case explicit:
		log.Debug("network config: asking with MsgNetworkConfig on a second connection (network-config: explicit)")
	default:
		log.Debug("network config: registering again until the server embeds it (upstream server)")
	}
	defer func() { r.waiting = false }()
	ctx, cancel := r.bound(ctx, r.o.NetworkTimeout)
	defer cancel()
	return r.policy(r.o.NetworkTimeout, PhaseNetwork).Do(ctx, "network config", func(ctx context.Context, attempt int) error {
		nc := first
		first = nil
		r.waiting = attempt > 1
		var err error
		switch {
		case nc != nil:
		case explicit:
			nc, err = r.explicitOnce(ctx)
		default:
			// Upstream servers: registering again is the only way to ask.
			var reply *protocol.Reply
			if reply, err = r.registerOnce(ctx); err == nil {
				nc = reply.Network
			}
			if err != nil {
				err = classifyRegister(err)
			}
		}
		if err != nil {
			return classifyNetwork(err)
		}
		if !nc.IsReal() {
			r.network = nc
			return nil
		}
		rendered, err := apply.Render(nc)
		var ue *apply.UnresolvedError
		var fe *apply.FieldError
		switch {
		case errors.As(err, &ue) && (authoritative || explicit):
			return retry.Terminal(&ConfigError{Err: fmt.Errorf("the server's network template uses a placeholder no address pool provides: %w", err)})
		case errors.As(err, &ue):
			return fmt.Errorf("addresses not ready yet: %w", err)
		case errors.As(err, &fe):
			return retry.Terminal(&ConfigError{Err: err})
		case err != nil:
			return retry.Terminal(&ConfigError{Err: err})
		}
		r.network, r.rendered = nc, rendered
		r.result.Configurator, r.result.Addresses = rendered.Configurator, nc.IPAddresses
		return nil
	})
}

func (r *run) explicitOnce(ctx context.Context) (*protocol.NetworkConfig, error) {
	cc, err := protocol.Dial(ctx, r.dialOptions(), r.auth)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	log := r.log.WithField("phase", PhaseNetwork)
	log.WithField("version", cc.Version).Debug("sending MsgNetworkConfig")
	nc, err := cc.ExplicitNetworkConfig(ctx)
	if err == nil && nc != nil {
		log.WithField("configurator", nc.Configurator).WithField("addresses", len(nc.IPAddresses)).Debug("received MsgNetworkConfig")
	}
	return nc, err
}

// classifyNetwork: pending addresses are retried (honouring the server's
// retry-after); an exhausted pool or a failed claim ends the run with the
// server's reason, retryable later by systemd (exit 75).
func classifyNetwork(err error) error {
	var er *protocol.ErrorReply
	if errors.As(err, &er) {
		switch er.Reason {
		case protocol.ReasonPoolExhausted, protocol.ReasonAllocationFailed:
			return retry.Terminal(err)
		}
	}
	return err
}

func (r *run) applier() *apply.Applier {
	a := &apply.Applier{
		Root:   r.o.Root,
		Runner: r.o.Runner,
		Tools:  apply.ToolsFromEnv(os.Getenv),
		Log:    r.log.WithField("phase", PhaseApply),
	}
	if a.Runner == nil {
		a.Runner = apply.ExecRunner{}
	}
	if r.o.DryRun {
		a.DryRun = r.o.Out
	}
	return a
}

// render turns the rendered config into a plan: keyfiles (nmstatectl gc for
// nmstate), the yip applicator, the commands. Dry runs print it.
func (r *run) render(ctx context.Context) error {
	if r.rendered == nil {
		return nil
	}
	r.result.Digest = r.rendered.Digest()
	if !r.o.DryRun && r.result.Digest == r.state.NetworkDigest && r.applicatorPresent() {
		r.log.WithField("phase", PhaseRender).WithField("digest", r.result.Digest).Info("network config unchanged since the last run: nothing to render or apply")
		return nil
	}
	plan, err := r.applier().Plan(ctx, r.rendered)
	var tm *apply.ToolMissingError
	switch {
	case errors.As(err, &tm) && r.o.DryRun:
		// A dry run on an admin's workstation still shows what it can.
		printRendered(r.o.Out, r.network, r.rendered)
		fmt.Fprintf(r.o.Out, "# keyfiles and applicator not shown: %v\n", err)
		return nil
	case errors.As(err, &tm):
		return &ConfigError{Err: err}
	case err != nil:
		var fe *apply.FieldError
		if errors.As(err, &fe) {
			return &ConfigError{Err: err}
		}
		return err
	}
	r.plan = plan
	if r.o.DryRun {
		for _, name := range sortedKeys(r.network.IPAddresses) {
			fmt.Fprintf(r.o.Out, "# address %s = %s\n", name, r.network.IPAddresses[name])
		}
		plan.Print(r.o.Out)
	}
	return nil
}

// persist writes and applies the plan when it differs from what the last
// run applied: an unchanged config costs nothing at boot.
func (r *run) persist(ctx context.Context) error {
	if r.plan == nil || r.o.DryRun {
		return nil
	}
	if r.o.PersistOnly {
		if err := r.applier().Persist(r.plan); err != nil {
			return err
		}
		// No digest recorded: a later live run applies it.
		r.state.NetworkState = netStateReady
		r.state.NetworkAddresses = formatAddresses(apply.InterfaceAddresses(r.rendered))
		r.log.WithField("phase", PhasePersist).WithField("root", r.o.Root).Warn("network config written under --root, not applied live (--root is not /; --apply-live applies it)")
		return nil
	}
	if err := r.applier().ApplyLive(ctx, r.plan, r.serverReachable); err != nil {
		return err
	}
	r.state.NetworkDigest = r.plan.Digest()
	r.state.NetworkState = netStateApplied
	r.state.NetworkAddresses = formatAddresses(apply.InterfaceAddresses(r.rendered))
	r.result.Applied = true
	return nil
}

// reportBack tells the server what this node did with its network config
// (ironcore's "node reports its NIC addresses" idea), as annotations that
// upstream servers store like any other: the state (pending, ready,
// applied) and the addresses per interface.
func (r *run) reportBack(a map[string]string) {
	st := r.state.NetworkState
	if r.waiting {
		st = netStatePending
	}
	if st != "" {
		a["network-config.state"] = st
	}
	if r.state.NetworkAddresses != "" {
		a["network-config.addresses"] = r.state.NetworkAddresses
	}
}

// applicatorPresent guards the unchanged-digest shortcut: if someone removed
// the applicator the config is written again.
func (r *run) applicatorPresent() bool {
	if r.rendered.Configurator == protocol.ConfiguratorNone {
		return true
	}
	_, err := os.Stat(r.path(apply.DefaultPaths().Applicator))
	return err == nil
}

// serverReachable is the check between a live apply and its commit: the
// registration server must still answer over the new network. A plain GET
// of the registration URL is answered by every elemental-operator without
// authentication (PROTOCOL.md 2.3).
func (r *run) serverReachable(ctx context.Context) error {
	// A server restarting at this very moment must not roll back a good
	// network: ask a few times, well inside the checkpoint's timeout.
	p := retry.Policy{Initial: time.Second, Max: 4 * time.Second, Deadline: reachabilityWindow, Clock: r.o.Clock}
	return p.Do(ctx, "reachability check", func(ctx context.Context, _ int) error { return r.reachableOnce(ctx) })
}

// reachabilityWindow is how long the check after a live apply may take;
// nmstate's checkpoint (60 s by default) rolls back on its own after that.
const reachabilityWindow = 15 * time.Second

func (r *run) reachableOnce(ctx context.Context) error {
	reg := r.cfg.Elemental.Registration
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := &http.Client{}
	if strings.HasPrefix(reg.URL, "https://") {
		tc, err := protocol.TLSConfig(r.caCert(), false)
		if err != nil {
			return err
		}
		client.Transport = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, reg.URL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("registration server unreachable after applying the network config: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("registration server answers %s after applying the network config", resp.Status)
	}
	return nil
}

func (r *run) finish(ctx context.Context) error {
	if r.tpm != nil {
		r.state.SetAKBlob(r.tpm.AKBlob())
	}
	if r.o.DryRun {
		fmt.Fprintln(r.o.Out, "# dry run: nothing written, nothing applied")
		return nil
	}
	r.state.LastPhase = PhaseFinish
	if err := r.state.Save(r.path(r.o.StatePath)); err != nil {
		return err
	}
	r.notify.Ready()
	return nil
}

func printRendered(w io.Writer, nc *protocol.NetworkConfig, rd *apply.Rendered) {
	fmt.Fprintf(w, "# network config: configurator %s\n", rd.Configurator)
	for _, name := range sortedKeys(nc.IPAddresses) {
		fmt.Fprintf(w, "# address %s = %s\n", name, nc.IPAddresses[name])
	}
	fmt.Fprintf(w, "--- digested config\n%s", rd.Digested)
	for _, k := range rd.Keyfiles {
		fmt.Fprintf(w, "--- keyfile %s\n%s", k.Name, k.Content)
	}
}

// PrintRender renders nc offline and prints what a dry run would print:
// the digested config, the keyfiles, the yip applicator and the commands.
func PrintRender(ctx context.Context, w io.Writer, nc *protocol.NetworkConfig) error {
	rd, err := apply.Render(nc)
	if err != nil {
		return err
	}
	r := newRun(Options{DryRun: true, Out: w})
	r.network, r.rendered = nc, rd
	r.state = &State{}
	return r.render(ctx)
}
