package agent

import (
	"context"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
)

// networkSource is where one attempt of PhaseFetchNetwork gets the config.
type networkSource string

const (
	// sourceNone: the server has no network config for this machine.
	sourceNone networkSource = "none"
	// sourceReply: the config embedded in the registration reply.
	sourceReply networkSource = "embedded"
	// sourceExplicit: MsgNetworkConfig on a new connection (docs/protocol.md §7.3).
	sourceExplicit networkSource = "explicit"
	// sourceReRegister: register again, the only way to ask an upstream
	// server for a config whose addresses were pending.
	sourceReRegister networkSource = "re-register"
)

// networkDecision is how PhaseFetchNetwork asks for the network config.
type networkDecision struct {
	// First is the source of the first attempt, Retry of the later ones.
	First, Retry networkSource
	// UnresolvedIsFinal: a placeholder no address fills is a template
	// error (exit 78), not a claim still pending. True only when the
	// server announced the explicit exchange (it then hands out only
	// configs whose claims all hold addresses). Upstream servers, seed PR
	// and HEAD alike, send unresolved placeholders while claims are
	// pending, whatever the mode: those are retried (docs/reliability.md,
	// "Hostile server", network-config: explicit).
	UnresolvedIsFinal bool
}

// decideNetwork is the network-config decision (docs/protocol.md
// §7.4): mode is elemental.registration.network-config (auto,
// embedded, explicit), reply the registration's answer.
func decideNetwork(mode string, reply *protocol.Reply) networkDecision {
	explicit := mode == localconfig.NetworkExplicit || (mode == localconfig.NetworkAuto && reply.ExplicitNetworkConfig)
	if !explicit && !reply.Network.IsReal() {
		return networkDecision{First: sourceNone, Retry: sourceNone}
	}
	d := networkDecision{Retry: sourceReRegister, UnresolvedIsFinal: reply.ExplicitNetworkConfig}
	// A server that embeds the config without announcing the exchange
	// (upstream HEAD) is asked again the way it answers: by registering.
	if explicit && (reply.Network == nil || reply.ExplicitNetworkConfig) {
		d.Retry = sourceExplicit
	}
	d.First = d.Retry
	if reply.Network != nil {
		d.First = sourceReply
	}
	return d
}

// fetchNetwork is PhaseFetchNetwork: a network config that carries real
// addresses, from the registration reply or by asking again as
// decideNetwork says, until the network timeout.
func (e *env) fetchNetwork(ctx context.Context, ph *phase, c *configured, id *identity, reg *registration) (*fetched, error) {
	mode := reg.cfg.Elemental.Registration.NetworkConfig
	reply := reg.reply
	d := decideNetwork(mode, reply)
	if d.First == sourceNone {
		if w := reply.Network.Unused(); w != "" {
			ph.log.Warn(w)
			return &fetched{reg: reg}, nil
		}
		ph.log.Info("no network config for this machine (configurator none)")
		return &fetched{reg: reg}, nil
	}
	log := ph.log.WithField("mode", mode)
	switch {
	case reply.Network.IsReal():
		log.Debug("network config: embedded in MsgConfig")
	case d.Retry == sourceExplicit && reply.ExplicitNetworkConfig:
		log.Debug("network config: asking with MsgNetworkConfig on a second connection (the server announced it)")
	case d.Retry == sourceExplicit:
		log.Debug("network config: asking with MsgNetworkConfig on a second connection (network-config: explicit)")
	default:
		log.Debug("network config: registering again until the server embeds it (upstream server)")
	}
	ctx, cancel := bound(ctx, e.o.NetworkTimeout)
	defer cancel()
	out, err := retry.Value(ctx, e.policy(e.o.NetworkTimeout, ph), "network config", func(ctx context.Context, attempt int) (*fetched, error) {
		src := d.Retry
		if attempt == 1 {
			src = d.First
		}
		// Every attempt asks from the phase's registration; only the one
		// that succeeds hands its own on.
		got, err := e.askNetwork(ctx, ph, src, c, id, reg)
		if err != nil {
			return nil, classifyNetwork(err, src == sourceExplicit && !reply.ExplicitNetworkConfig)
		}
		if !got.config.IsReal() {
			if w := got.config.Unused(); w != "" {
				ph.log.Warn(w)
			}
			return &fetched{reg: got.reg}, nil
		}
		rendered, err := apply.Render(got.config)
		if err != nil {
			return nil, classifyRender(err, d.UnresolvedIsFinal)
		}
		return &fetched{reg: got.reg, net: &netConfig{config: got.config, rendered: rendered}}, nil
	})
	if err != nil {
		return nil, err
	}
	if out.reg != reg {
		// The run goes on with a registration of this phase's: its
		// conversation decides on the server's CA, as PhaseRegister's did.
		e.rotateCA(ctx, ph, out.reg.ca)
	}
	return out, nil
}

// networkAnswer is one attempt's answer: the network config and the registration
// it came with.
type networkAnswer struct {
	config *protocol.NetworkConfig
	reg    *registration
}

// askNetwork is one attempt's question, to the source the decision named;
// reg is the registration so far.
func (e *env) askNetwork(ctx context.Context, ph *phase, src networkSource, c *configured, id *identity, reg *registration) (networkAnswer, error) {
	switch src {
	case sourceReply:
		return networkAnswer{config: reg.reply.Network, reg: reg}, nil
	case sourceExplicit:
		opts, err := e.dialOptions(ph, reg.cfg.Elemental.Registration)
		if err != nil {
			return networkAnswer{}, err
		}
		cc, err := protocol.Dial(ctx, opts, id.auth)
		if err != nil {
			return networkAnswer{}, err
		}
		defer cc.Close()
		log := ph.log
		log.WithField("version", cc.Version).Debug("sending MsgNetworkConfig")
		nc, err := cc.ExplicitNetworkConfig(ctx)
		if err == nil && nc != nil {
			log.WithField("configurator", nc.Configurator).WithField("addresses", len(nc.IPAddresses)).Debug("received MsgNetworkConfig")
		}
		return networkAnswer{config: nc, reg: reg}, err
	default:
		// The registration goes out again with network-config.state
		// pending: the node is still waiting for its addresses.
		again, err := e.registerOnce(ctx, ph, c, id.auth, reg.cfg, reg.state, netreport.StatePending)
		if err != nil {
			return networkAnswer{}, classifyRegister(err)
		}
		return networkAnswer{config: again.reply.Network, reg: again}, nil
	}
}
