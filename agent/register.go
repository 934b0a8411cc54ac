package agent

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// pendingInventory is the hardware inventory being collected in the
// background since PhaseConfig.
type pendingInventory struct {
	done   chan struct{}
	inv    *inventory.Inventory
	cancel context.CancelFunc
}

func collectInventory(ctx context.Context, o inventory.Options) *pendingInventory {
	ctx, cancel := context.WithCancel(ctx)
	p := &pendingInventory{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		inv, err := inventory.Collect(ctx, o)
		if err != nil {
			o.Log.WithError(err).Warn("hardware inventory unavailable: registering without it")
			inv = &inventory.Inventory{}
		}
		if len(inv.Degraded) > 0 && !inventory.Stopped(ctx) {
			o.Log.WithField("families", strings.Join(inv.Degraded, ",")).Warn("inventory is partial")
		}
		p.inv = inv
	}()
	return p
}

// stop cancels the collection and waits for it: nothing it logs may come
// after the run's final line.
func (p *pendingInventory) stop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

// wait returns the inventory once collected. It is called once the
// connection is up, so collection overlaps the TPM work and the dial.
func (p *pendingInventory) wait(ctx context.Context) (*inventory.Inventory, error) {
	select {
	case <-p.done:
		return p.inv, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
	files := r.files
	if files == nil { // a run made by hand in a test
		files = host.Root(r.o.Root)
	}
	return r.trustedCA(files)
}

// policy is the retry policy of a phase: its waits are logged and shown in
// the systemd STATUS, and extend systemd's start timeout.
func (r *run) policy(deadline time.Duration, ph *phase) retry.Policy {
	hook := r.notify.RetryHook(string(ph.name), protocol.DefaultSessionDeadline+5*time.Second)
	p := RetryPolicy(deadline, r.o.Clock)
	p.OnWait = func(attempt int, d time.Duration, err error) {
		until := ""
		if attempt == 1 && deadline > 0 { // the first wait says how long the retries may go on
			until = fmt.Sprintf(" (retrying until the %s deadline)", deadline)
		}
		ph.log.WithField("attempt", attempt).WithError(err).Warnf("retrying in %s%s", d.Round(time.Millisecond), until)
		hook(attempt, d, err)
	}
	return p
}

// RetryPolicy is the retry policy of every phase that talks to the server,
// without the hooks that log and tell systemd: the reboot-storm benchmark
// (docs/performance.md) runs its simulated machines through it, with
// ClassifyRegister, so it measures the agent's backoff and jitter.
func RetryPolicy(deadline time.Duration, clock retry.Clock) retry.Policy {
	return retry.Policy{Deadline: deadline, Clock: clock, Retryable: exitcode.Retryable, Max: 30 * time.Second}
}

// ClassifyRegister is what the registration phase makes of a failed
// conversation before RetryPolicy judges it.
func ClassifyRegister(err error) error { return classifyRegister(err) }

// bound makes the retry deadline a hard one: the attempt in flight when it
// passes is cut there (protocol.Dial clamps its session to the context).
func (r *run) bound(ctx context.Context, deadline time.Duration) (context.Context, context.CancelFunc) {
	if deadline <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, deadline)
}

// register runs the registration conversation with retries and returns the
// server's reply.
func (r *run) register(ctx context.Context, ph *phase) (*protocol.Reply, error) {
	ctx, cancel := r.bound(ctx, r.o.Deadline)
	defer cancel()
	var reply *protocol.Reply
	err := r.policy(r.o.Deadline, ph).Do(ctx, "registration", func(ctx context.Context, attempt int) error {
		var err error
		if reply, err = r.registerOnce(ctx, ph, r.state.NetworkState); err != nil {
			return classifyRegister(err)
		}
		return nil
	})
	return reply, err
}

// registerOnce is one registration conversation; netState is the
// network-config.state reported back (see reportBack).
func (r *run) registerOnce(ctx context.Context, ph *phase, netState string) (*protocol.Reply, error) {
	reg := r.cfg.Elemental.Registration
	cc, err := protocol.Dial(ctx, r.dialOptions(), r.auth)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	log := ph.log
	log.WithField("url", protocol.RedactURL(reg.URL)).WithField("auth", r.auth.Kind()).WithField("version", cc.Version).Debug("connected: authenticated, protocol version negotiated")
	inv, err := r.inv.wait(ctx)
	if err != nil {
		return nil, err
	}
	r.result.Updated = r.state.Registered()
	annotations := maps.Clone(r.annotations)
	if ip := cc.RegistrationIP(); ip != "" {
		annotations["registration-ip"] = ip
	}
	reportBack(annotations, netState, r.state.NetworkAddresses)
	netreport.Annotate(annotations, r.state.Network, netState)
	payloads := &protocol.Payloads{
		Update:       r.state.Registered(),
		NoSMBIOS:     reg.NoSMBIOS,
		SMBIOS:       inv.SMBIOS,
		SystemDataV2: inv.SystemDataV2,
		Annotations:  annotations,
		Labels:       r.labels,
	}
	if protocol.SendsLegacySystemData(cc.Version) {
		if payloads.LegacySystemData, err = inv.LegacySystemData(); err != nil {
			return nil, err
		}
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
	sentCA := cfg.Elemental.Registration.CACert
	for _, w := range append(localconfig.KeepLocal(*r.cfg, &cfg), localconfig.ServerSent(reply.Doc)...) {
		log.Warn(w)
	}
	// The server's CA is never merged: rotation takes it, or not.
	cfg.Elemental.Registration.CACert = r.cfg.Elemental.Registration.CACert
	r.rotateCA(ctx, log, sentCA, cc.PeerCertificates())
	got := log.WithField("explicit-network-config", reply.ExplicitNetworkConfig)
	if reply.Network != nil {
		got = got.WithField("configurator", reply.Network.Configurator).WithField("addresses", len(reply.Network.IPAddresses))
	}
	got.Debug("received MsgConfig")
	checkServerReply(log, reply)
	r.cfg = &cfg
	r.result.Registered = true
	if r.state.InitialRegistration.IsZero() {
		r.state.InitialRegistration = time.Now().UTC()
	}
	return reply, nil
}

// reportBack tells the server what this node did with its network config
// (ironcore's "node reports its NIC addresses" idea), as annotations that
// upstream servers store like any other: the state (pending, ready,
// applied) and the addresses per interface.
func reportBack(a map[string]string, state, addresses string) {
	if state != "" {
		a["network-config.state"] = state
	}
	if addresses != "" {
		a["network-config.addresses"] = addresses
	}
}
