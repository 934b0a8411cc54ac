package agent

import (
	"github.com/nodereg/nodereg/agent/handover"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm"
)

// What the phases hand on, one type a product: config → state → identity
// → registration → network → plan → outcome. A product is made once, by
// its phase, and read by later ones; the state file's content travels in
// them as a value, so each phase returns the state it changed.

// configured is PhaseConfig's product: the local config as decoded, and
// what this run sends with every registration.
type configured struct {
	// cfg is the local config; a registration's reply is merged onto a
	// copy (registration.cfg).
	cfg *protocol.Config
	// nmstate is the local choice of nmstate's keyfile generator;
	// netPolicy the local network-config policy (netpolicy).
	nmstate   apply.NmstateChoice
	netPolicy netpolicy.Policy
	// boot is the local bootstrap network config (nil: none).
	boot *bootstrap.Config
	// labels and annotations (but registration-ip) are what this run
	// sends; read once.
	labels      map[string]string
	annotations map[string]string
	// inv is the hardware inventory being collected since PhaseConfig.
	inv *pendingInventory
	// apply is the apply library on the run's edges with the local
	// choices (configured.applier tags it per phase).
	apply apply.Applier
	// offline: the plan is for some other machine (agent render), so the
	// keyfile names are not checked against this host's keyfile directory.
	offline bool
}

// prior is PhaseState's product: the state file as read, what install and
// reset forget already forgotten.
type prior struct {
	state state.State
	// appliedDigest is the network digest as read, before install and
	// reset forget it: whether a config of ours is applied here.
	appliedDigest string
}

// identity is PhaseIdentity's product: what authenticates this machine,
// and the state with the TPM emulation settings it used.
type identity struct {
	auth protocol.Authenticator
	// tpm is open for auth tpm (closed when the run ends); hash is its
	// identity.
	tpm   *tpm.TPM
	hash  string
	state state.State
	// seedDrawn: an emulated TPM's seed was chosen in this run; the state
	// holding it is saved when the phase ends, before the server hears of
	// it, so a power cut cannot make the next boot draw another (a second
	// inventory; docs/apply.md, crash consistency).
	seedDrawn bool
}

// registration is a successful registration conversation's product.
type registration struct {
	reply *protocol.Reply
	// cfg is the config with the reply merged (what a reply may not
	// change kept local).
	cfg *protocol.Config
	// updated: it was a registration update (MsgUpdate).
	updated bool
	// state is the state with the registration time set.
	state state.State
	// ca is what the conversation said about the server's CA, for the
	// rotation the phase decides once its retries are over (rotateCA).
	ca caAnnouncement
}

// netConfig is the server's network config and its render.
type netConfig struct {
	config   *protocol.NetworkConfig
	rendered *apply.Rendered
}

// fetched is PhaseFetchNetwork's product: the network config (nil: none
// for this machine) and the registration the run goes on with (a later
// one than PhaseRegister's when the fetch registered again).
type fetched struct {
	reg *registration
	net *netConfig
}

// outcome is the product of PhaseApply or PhaseHandOver: the state to save
// and whether the config was applied in this run.
type outcome struct {
	state   state.State
	applied bool
	// toolkit is the hand-over's toolkit run, its hook written: the
	// runner saves state first (nil: no toolkit to run).
	toolkit *handover.Toolkit
}

// handoffs are the products of a run's phases so far, one field a phase
// (phaseList sets each); what a run reports is read from them (result).
type handoffs struct {
	conf    *configured
	prior   *prior
	id      *identity
	bootNet *bootstrap.Network
	reg     *registration
	fetched *fetched
	plan    *apply.Plan
	out     *outcome
	// final is PhaseFinish's: the state the run ends with.
	final *state.State
}

// secrets are what the products so far say a dry run's output must not
// show: each config a phase returned (the local one, the registration's,
// the one the fetch went on with) is learnt by the next phase's edges.
func (h *handoffs) secrets() redactor {
	var r redactor
	if h.conf != nil {
		r = r.learn(h.conf.cfg)
	}
	if h.reg != nil {
		r = r.learn(h.reg.cfg)
	}
	if h.fetched != nil {
		r = r.learn(h.fetched.reg.cfg)
	}
	return r
}

// result is what the run did, from its products; the TPM's counts are
// added once it is closed.
func (h *handoffs) result() Result {
	var res Result
	if h.id != nil {
		res.TPMHash = h.id.hash
	}
	reg := h.reg
	if h.fetched != nil {
		reg = h.fetched.reg
	}
	if reg != nil {
		res.Registered, res.Updated = true, reg.updated
	}
	if h.fetched != nil && h.fetched.net != nil {
		n := h.fetched.net
		res.Configurator, res.Addresses, res.Digest = n.rendered.Configurator, n.config.IPAddresses, n.rendered.Digest()
	}
	if h.out != nil {
		res.Applied = h.out.applied
	}
	return res
}
