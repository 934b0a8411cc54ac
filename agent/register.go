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
	"github.com/nodereg/nodereg/internal/state"
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
			log := o.Log.WithField("families", strings.Join(inv.Degraded, ","))
			if moved := host.MovedHint(o.Files, host.SysClassNet); moved != "" {
				log = log.WithField("why", moved) // a scratch root without /sys
			}
			log.Warn("inventory is partial")
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

func (e *env) dialOptions(ph *phase, reg protocol.Registration) (protocol.DialOptions, error) {
	// The upgrade gets no more time than a whole session: a server that
	// accepts TCP and never answers must not hold the run for gorilla's
	// default 45 s.
	session := e.o.SessionDeadline
	if session == 0 {
		session = protocol.DefaultSessionDeadline
	}
	ca, err := e.trustedCA(ph, reg)
	return protocol.DialOptions{URL: reg.URL, CACert: ca, SessionDeadline: session, HandshakeTimeout: session}, err
}

// policy is the retry policy of a phase: its waits are logged and shown in
// the systemd STATUS, and extend systemd's start timeout.
func (e *env) policy(deadline time.Duration, ph *phase) retry.Policy {
	hook := e.notify.RetryHook(string(ph.name), protocol.DefaultSessionDeadline+5*time.Second)
	p := RetryPolicy(deadline, e.o.Clock)
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
func bound(ctx context.Context, deadline time.Duration) (context.Context, context.CancelFunc) {
	if deadline <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, deadline)
}

// register is PhaseRegister: the registration conversation, with retries.
func (e *env) register(ctx context.Context, ph *phase, c *configured, id *identity) (*registration, error) {
	ctx, cancel := bound(ctx, e.o.Deadline)
	defer cancel()
	reg, err := retry.Value(ctx, e.policy(e.o.Deadline, ph), "registration", func(ctx context.Context, attempt int) (*registration, error) {
		reg, err := e.registerOnce(ctx, ph, c, id.auth, c.cfg, id.state, id.state.NetworkState)
		return reg, classifyRegister(err)
	})
	if err != nil {
		return nil, err
	}
	e.rotateCA(ctx, ph, reg.ca)
	return reg, nil
}

// registerOnce is one registration conversation from cfg (the local config,
// or a registration's) and st (the state so far); netState is the
// network-config.state reported back (see reportBack). It changes none of
// its arguments and writes nothing: the merged config, the new state and
// what the server said of its CA are in what it returns.
func (e *env) registerOnce(ctx context.Context, ph *phase, c *configured, auth protocol.Authenticator, cfg *protocol.Config, st state.State, netState string) (*registration, error) {
	reg := cfg.Elemental.Registration
	opts, err := e.dialOptions(ph, reg)
	if err != nil {
		return nil, err
	}
	cc, err := protocol.Dial(ctx, opts, auth)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	log := ph.log
	log.WithField("url", protocol.RedactURL(reg.URL)).WithField("auth", auth.Kind()).WithField("version", cc.Version).Debug("connected: authenticated, protocol version negotiated")
	inv, err := c.inv.wait(ctx)
	if err != nil {
		return nil, err
	}
	payloads, err := c.payloads(inv, cc.Version, reg.NoSMBIOS, st, netState, cc.RegistrationIP())
	if err != nil {
		return nil, err
	}
	if payloads.Update {
		log.Debug("sending MsgUpdate (registered before), then MsgGet")
	} else {
		log.WithField("labels", len(payloads.Labels)).WithField("annotations", len(payloads.Annotations)).WithField("no-smbios", payloads.NoSMBIOS).
			Debug("sending MsgSmbios, MsgSystemData, MsgAnnotations, MsgLabels, then MsgGet")
	}
	// Decode onto a copy: a failed attempt must not half-change the config.
	merged := *cfg
	reply, err := cc.Register(ctx, payloads, &merged)
	if err != nil {
		return nil, err
	}
	sentCA := merged.Elemental.Registration.CACert
	for _, w := range append(localconfig.KeepLocal(*cfg, &merged), localconfig.ServerSent(reply.Doc)...) {
		log.Warn(w)
	}
	if w := localconfig.MovedURL(*cfg, merged); w != "" {
		log.WithField("url", protocol.RedactURL(reg.URL)).WithField("moved-to", protocol.RedactURL(merged.Elemental.Registration.URL)).Warn(w)
	}
	// The server's CA is never merged: rotation takes it, or not, once
	// the phase's retries are over.
	merged.Elemental.Registration.CACert = reg.CACert
	got := log.WithField("explicit-network-config", reply.ExplicitNetworkConfig)
	if reply.Network != nil {
		got = got.WithField("configurator", reply.Network.Configurator).WithField("addresses", len(reply.Network.IPAddresses))
	}
	got.Debug("received MsgConfig")
	checkServerReply(log, reply)
	out := &registration{reply: reply, cfg: &merged, updated: st.Registered(), state: st,
		ca: caAnnouncement{reg: reg, sent: sentCA, peer: cc.PeerCertificates()}}
	if out.state.InitialRegistration.IsZero() {
		out.state.InitialRegistration = e.o.Clock.Now().UTC()
	}
	return out, nil
}

// payloads are what one registration sends: the inventory, the labels,
// and the annotations with what this connection and the state add.
func (c *configured) payloads(inv *inventory.Inventory, version byte, noSMBIOS bool, st state.State, netState, registrationIP string) (*protocol.Payloads, error) {
	annotations := maps.Clone(c.annotations)
	if registrationIP != "" {
		annotations["registration-ip"] = registrationIP
	}
	reportBack(annotations, netState, st.NetworkAddresses)
	netreport.Annotate(annotations, st.Network, netState)
	p := &protocol.Payloads{
		Update:       st.Registered(),
		NoSMBIOS:     noSMBIOS,
		SMBIOS:       inv.SMBIOS,
		SystemDataV2: inv.SystemDataV2,
		Annotations:  annotations,
		Labels:       c.labels,
	}
	if protocol.SendsLegacySystemData(version) {
		var err error
		if p.LegacySystemData, err = inv.LegacySystemData(); err != nil {
			return nil, err
		}
	}
	if p.SMBIOS == nil {
		p.SMBIOS = map[string]any{}
	}
	if p.SystemDataV2 == nil {
		p.SystemDataV2 = map[string]any{}
	}
	return p, nil
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
