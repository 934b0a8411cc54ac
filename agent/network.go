package agent

import (
	"context"

	"github.com/nodereg/nodereg/agent/netreport"
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
	// pending, whatever the mode: those are retried (issue 21, item 7).
	UnresolvedIsFinal bool
}

// decideNetwork is the network-config decision (docs/protocol.md
// §7.4): mode is elemental.registration.network-config (auto,
// embedded, explicit), reply the registration's answer.
func decideNetwork(mode string, reply *protocol.Reply) networkDecision {
	explicit := mode == networkModeExplicit || (mode == networkModeAuto && reply.ExplicitNetworkConfig)
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

// fetched is what PhaseFetchNetwork hands to PhasePlan: the server's config
// and its render. A nil *fetched: no network config for this machine.
type fetched struct {
	config   *protocol.NetworkConfig
	rendered *apply.Rendered
}

// fetchNetwork gets a network config that carries real addresses: from the
// registration reply, or by asking again as decideNetwork says, until the
// network timeout.
func (r *run) fetchNetwork(ctx context.Context, ph *phase, reply *protocol.Reply) (*fetched, error) {
	d := decideNetwork(r.cfg.Elemental.Registration.NetworkConfig, reply)
	if d.First == sourceNone {
		if w := reply.Network.Unused(); w != "" {
			ph.log.Warn(w)
			return nil, nil
		}
		ph.log.Info("no network config for this machine (configurator none)")
		return nil, nil
	}
	log := ph.log.WithField("mode", r.cfg.Elemental.Registration.NetworkConfig)
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
	var out *fetched
	ctx, cancel := r.bound(ctx, r.o.NetworkTimeout)
	defer cancel()
	err := r.policy(r.o.NetworkTimeout, ph).Do(ctx, "network config", func(ctx context.Context, attempt int) error {
		src := d.Retry
		if attempt == 1 {
			src = d.First
		}
		nc, err := r.askNetwork(ctx, ph, src, reply)
		if err != nil {
			return classifyNetwork(err, src == sourceExplicit && !reply.ExplicitNetworkConfig)
		}
		if !nc.IsReal() {
			if w := nc.Unused(); w != "" {
				ph.log.Warn(w)
			}
			return nil
		}
		rendered, err := apply.Render(nc)
		if err != nil {
			return classifyRender(err, d.UnresolvedIsFinal)
		}
		out = &fetched{config: nc, rendered: rendered}
		return nil
	})
	if out != nil {
		r.result.Configurator, r.result.Addresses = out.rendered.Configurator, out.config.IPAddresses
	}
	return out, err
}

// askNetwork is one attempt's question, to the source the decision named.
func (r *run) askNetwork(ctx context.Context, ph *phase, src networkSource, reply *protocol.Reply) (*protocol.NetworkConfig, error) {
	switch src {
	case sourceReply:
		return reply.Network, nil
	case sourceExplicit:
		cc, err := protocol.Dial(ctx, r.dialOptions(), r.auth)
		if err != nil {
			return nil, err
		}
		defer cc.Close()
		log := ph.log
		log.WithField("version", cc.Version).Debug("sending MsgNetworkConfig")
		nc, err := cc.ExplicitNetworkConfig(ctx)
		if err == nil && nc != nil {
			log.WithField("configurator", nc.Configurator).WithField("addresses", len(nc.IPAddresses)).Debug("received MsgNetworkConfig")
		}
		return nc, err
	default:
		// The registration goes out again with network-config.state
		// pending: the node is still waiting for its addresses.
		again, err := r.registerOnce(ctx, ph, netreport.StatePending)
		if err != nil {
			return nil, classifyRegister(err)
		}
		return again.Network, nil
	}
}
