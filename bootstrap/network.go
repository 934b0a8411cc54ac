package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
)

// The bootstrap network (docs/bootstrap.md): on a segment without DHCP the
// agent brings up a temporary address from the local config's
// elemental.registration.bootstrap-network, registers over it, and drops it
// once the IPAM config is applied and the server is reachable over that.
// Up is the one entry point; the agent only decides when to call it.

// Bounds of the bootstrap phase: every wait ends.
const (
	// reachDialTimeout bounds the TCP connect that tells whether the
	// server is reachable as the node is.
	reachDialTimeout = 5 * time.Second
	// linkReadyTimeout bounds the wait for carrier before probing.
	linkReadyTimeout = 30 * time.Second
	// reachTimeout bounds the wait for the server over the bootstrap
	// network once it is up (NetworkManager's own DAD, ipv4.dad-timeout,
	// runs before the address is usable).
	reachTimeout = 30 * time.Second
	// ProbeIntervalEnv shortens the ARP probe's clock (docs/bootstrap.md):
	// three probes this far apart and a listen of twice it after the last.
	// Unset: RFC 5227's timing, 4-7 s per address.
	ProbeIntervalEnv = "NODEREG_BOOTSTRAP_PROBE_INTERVAL"
)

// Env is what bringing the bootstrap network up takes from the run.
type Env struct {
	// Files is the host edge: facts, keyfiles, the walk memory.
	Files host.FS
	// Applier makes the keyfiles the way the IPAM config's are made (the
	// same keyfile generator) and activates them.
	Applier *apply.Applier
	// Log is the phase's logger (tagged with the phase already).
	Log *logrus.Entry
	// URL is the registration URL whose reachability decides.
	URL string
	// AppliedDigest is the state's network digest as read: whether a
	// config of ours is applied here.
	AppliedDigest string
	// PersistOnly: a scratch --root without --apply-live; nothing is
	// activated.
	PersistOnly bool
	// Deadline bounds the address choice (the run's --deadline; 0: none).
	Deadline time.Duration
	// Extend pushes systemd's start timeout past a wait (nil: nothing).
	Extend func(time.Duration)
	// Prober tells a free address from a held one; nil: the ARP prober
	// with ProbeInterval's timing.
	Prober Prober
	// ProbeInterval is NODEREG_BOOTSTRAP_PROBE_INTERVAL's value ("": RFC
	// 5227's timing).
	ProbeInterval string
	// LinkReady raises a probe interface and waits for carrier; nil:
	// LinkReady.
	LinkReady func(ctx context.Context, iface string) (raised bool, err error)
	// Unreachable says why the server cannot be reached as the node is,
	// nil when it can; nil: a bounded TCP connect to URL (ServerUnreachable).
	Unreachable func(ctx context.Context) error
}

func (e *Env) log() *logrus.Entry { return logx.OrDiscard(e.Log) }

func (e *Env) extend(d time.Duration) {
	if e.Extend != nil {
		e.Extend(d)
	}
}

func (e *Env) unreachable(ctx context.Context) error {
	if e.Unreachable != nil {
		return e.Unreachable(ctx)
	}
	return ServerUnreachable(ctx, e.URL, reachDialTimeout)
}

func (e *Env) linkReady(ctx context.Context, iface string) (bool, error) {
	if e.LinkReady != nil {
		return e.LinkReady(ctx, iface)
	}
	return LinkReady(ctx, iface)
}

// applicatorOnDisk: /oem holds a network applicator of ours.
func (e *Env) applicatorOnDisk() bool {
	_, err := e.Files.Stat(host.Applicator)
	return err == nil
}

// Network is a bootstrap network this run brought up or took over. A nil
// *Network is none: Drop and Restore do nothing.
type Network struct {
	env Env
	// keyfiles as NetworkManager names them (nmPaths).
	keyfiles []string
}

// Keyfiles are the profiles in use, as NetworkManager names them.
func (n *Network) Keyfiles() []string {
	if n == nil {
		return nil
	}
	return n.keyfiles
}

// Decision is whether the bootstrap network comes up, and why, for the log.
type Decision struct {
	Needed bool
	Reason string
}

// Decide is the "bootstrap needed?" rule (docs/bootstrap.md "When the
// bootstrap network is used"): only with a bootstrap config, only on a node
// with no network config of ours applied (no digest in the state, no
// applicator under /oem), and only when the server is not reachable as the
// node is: unreachable is asked last, so a node that needs no bootstrap
// network does not wait for a dial, and returns nil when reachable. A node
// where DHCP works never gets past it.
func Decide(hasConfig bool, appliedDigest string, applicator bool, unreachable func() error) Decision {
	switch {
	case !hasConfig:
		return Decision{Reason: "no " + Key + " in the config file"}
	case appliedDigest != "":
		return Decision{Reason: "a network config of ours is applied (state file)"}
	case applicator:
		return Decision{Reason: "a network applicator of ours is under /oem"}
	}
	err := unreachable()
	if err == nil {
		return Decision{Reason: "the registration server is reachable as the node is"}
	}
	return Decision{Needed: true, Reason: "the registration server is not reachable (" + err.Error() + ") and no network config of ours is applied"}
}

// ServerUnreachable tells whether the registration server cannot be reached
// as the node is: a bounded TCP connect to the URL's host and port. Only a
// network failure counts (no route, no address, a timeout, a name that does
// not resolve); a refused connection means the network works and the
// server does not listen, which a bootstrap address would not change. TLS
// and the protocol are the registration's business.
func ServerUnreachable(ctx context.Context, rawURL string, timeout time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil // the config phase validated it; the dial will say
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" || u.Scheme == "ws" {
			port = "80"
		}
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err == nil {
		c.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	return err
}

// Up decides, and brings the bootstrap network of c up when needed, or
// takes over the one a previous run left up; nil when none is in use. The
// config is validated (FromConfigNode) and rendered once, here.
func Up(ctx context.Context, c *Config, env Env) (*Network, error) {
	if c == nil {
		return nil, nil
	}
	log := env.log()
	owned, err := RuntimeKeyfiles.Owned(env.Files)
	if err != nil {
		return nil, err
	}
	var kept *Network
	if len(owned) > 0 {
		if env.AppliedDigest == "" {
			return takeOver(ctx, env, owned)
		}
		kept = dropLeftover(ctx, env, owned)
	}
	d := Decide(true, env.AppliedDigest, env.applicatorOnDisk(), func() error { return env.unreachable(ctx) })
	if !d.Needed {
		log.WithField("why", d.Reason).Info("bootstrap network not needed")
		return kept, nil
	}
	if env.PersistOnly {
		log.WithField("why", d.Reason).Warn("bootstrap network needed but not brought up: --root is not / (--apply-live brings it up)")
		return nil, nil
	}
	log.WithField("why", d.Reason).Info("bringing up the bootstrap network")
	plan, err := chooseUp(ctx, c, env)
	if err != nil {
		return nil, err
	}
	kfs, err := keyfiles(ctx, env, plan)
	if err != nil {
		return nil, err
	}
	written, err := plan.Keyfiles.Write(env.Files, kfs)
	if err != nil {
		return nil, err
	}
	n := &Network{env: env, keyfiles: nmPaths(written)}
	if err := env.Applier.Activate(ctx, n.keyfiles); err != nil {
		// A profile that does not come up is taken away again: the next
		// run chooses afresh.
		if _, rmErr := plan.Keyfiles.Remove(env.Files); rmErr != nil {
			log.WithError(rmErr).Warn("removing the bootstrap keyfiles")
		}
		if rlErr := env.Applier.Activate(context.WithoutCancel(ctx), nil); rlErr != nil {
			log.WithError(rlErr).Warn("reloading NetworkManager")
		}
		return nil, fmt.Errorf("activating the bootstrap network: %w", err)
	}
	logChoices(log, plan)
	waitReachable(ctx, env)
	return n, nil
}

// takeOver is Up when a previous run (exit 75) left the bootstrap network
// up and no config of ours is applied: this run owns it, and drops it once
// the IPAM config works.
func takeOver(ctx context.Context, env Env, owned []string) (*Network, error) {
	log := env.log()
	n := &Network{env: env, keyfiles: nmPaths(owned)}
	unreachable := env.unreachable(ctx)
	if unreachable == nil {
		log.WithField("keyfiles", len(owned)).Info("bootstrap network of a previous run is up: using it")
		return n, nil
	}
	if env.PersistOnly {
		log.Warn("bootstrap network not activated: --root is not / (--apply-live activates it)")
		return n, nil
	}
	log.WithField("keyfiles", len(owned)).WithField("unreachable", unreachable.Error()).Info("bootstrap keyfiles of a previous run found: activating them again")
	if err := env.Applier.Activate(ctx, n.keyfiles); err != nil {
		return nil, fmt.Errorf("activating the bootstrap network: %w", err)
	}
	waitReachable(ctx, env)
	return n, nil
}

// dropLeftover removes the bootstrap profiles of an earlier run that ended
// between applying the IPAM config and dropping them (a crash, a kill): a
// config of ours is applied, so they are no longer needed, and once the
// server answers as the node is, they go and NetworkManager reloads. A
// server away now keeps them for this run (the handle returned): Drop
// removes them after its apply, Restore brings them back after a rollback.
func dropLeftover(ctx context.Context, env Env, owned []string) *Network {
	if env.PersistOnly {
		return nil
	}
	log := env.log()
	if err := env.unreachable(ctx); err != nil {
		log.WithField("keyfiles", len(owned)).WithField("unreachable", err.Error()).Info("bootstrap keyfiles of an earlier run kept for now: the server is not reachable as the node is")
		return &Network{env: env, keyfiles: nmPaths(owned)}
	}
	removed, err := RuntimeKeyfiles.Remove(env.Files)
	if err != nil {
		log.WithError(err).Warn("removing the bootstrap keyfiles of an earlier run")
	}
	if err := env.Applier.Activate(ctx, nil); err != nil {
		log.WithError(err).Warn("reloading NetworkManager after removing the bootstrap keyfiles")
	}
	log.WithField("keyfiles", len(removed)).Info("bootstrap keyfiles of an earlier run removed: a network config of ours is applied and the server is reachable")
	return nil
}

func logChoices(log *logrus.Entry, plan *Plan) {
	for _, c := range plan.Choices {
		e := log.WithField("placeholder", c.Placeholder).WithField("address", c.Address.String()).
			WithField("source", c.Source).WithField("first-try", c.FirstTry.String())
		if c.Interface != "" {
			e = e.WithField("probed-on", c.Interface)
		}
		if len(c.Taken) > 0 {
			var held []string
			for _, t := range c.Taken {
				held = append(held, t.Address.String()+" by "+t.Holder.String())
			}
			e = e.WithField("in-use", strings.Join(held, ","))
		}
		e.Info("bootstrap address up")
	}
}

// keyfiles renders the plan's network config with the code that renders
// the server's (apply.Render), and gets its keyfiles the way the IPAM
// config's are made (the same applier and keyfile generator).
func keyfiles(ctx context.Context, env Env, plan *Plan) ([]apply.Keyfile, error) {
	rendered, err := apply.Render(plan.Network)
	if err != nil {
		return nil, err
	}
	p, err := env.Applier.PlanKeyfiles(ctx, rendered)
	if err != nil {
		return nil, err
	}
	// The bootstrap keyfiles go live the keyfile way whatever made them
	// (so not GeneratorNote's words); which generator ran is worth a line.
	if p.Generator != apply.GeneratorNone {
		env.log().WithField("generator", p.Generator).WithField("keyfiles", len(p.Keyfiles)).Info("bootstrap keyfiles generated")
	}
	return bootstrapUUIDs(p.Keyfiles), nil
}

// nmPaths are the keyfiles as NetworkManager names them: its runtime
// directory is compiled in (/run/NetworkManager/system-connections), so
// under a scratch --root it still reports /run/…, and activation looks the
// profiles up by that name.
func nmPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, path.Join(RuntimeKeyfiles.Dir, path.Base(p)))
	}
	return out
}

// waitReachable waits, bounded, for the server over the bootstrap network;
// a server that stays away is the registration's to report (with its
// retries), so this only warns.
func waitReachable(ctx context.Context, env Env) {
	log := env.log()
	env.extendPast(reachTimeout)
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := env.unreachable(ctx)
		if err == nil {
			log.Info("registration server reachable over the bootstrap network")
			return
		}
		select {
		case <-ctx.Done():
			log.WithError(err).Warn("registration server still unreachable over the bootstrap network: registering anyway")
			return
		case <-tick.C:
		}
	}
}

// Drop removes the bootstrap profiles once a network config of ours is
// applied (applied) and the server was reachable over it, and reloads
// NetworkManager, which drops the profiles whose files are gone and takes
// down a connection still active on one (state reason
// connection-removed); usually the IPAM profile has taken the device
// already. Failures are warnings: the IPAM config works, and /run is gone
// at the next boot. log is the calling phase's.
func (n *Network) Drop(ctx context.Context, log *logrus.Entry, applied bool) {
	if n == nil || len(n.keyfiles) == 0 {
		return
	}
	log = logx.OrDiscard(log)
	if !applied {
		log.Warn("bootstrap network kept: no network config of ours is applied (it is gone at the next boot)")
		return
	}
	removed, err := RuntimeKeyfiles.Remove(n.env.Files)
	if err != nil {
		log.WithError(err).Warn("removing the bootstrap keyfiles")
	}
	if err := n.applier(log).Activate(ctx, nil); err != nil {
		log.WithError(err).Warn("reloading NetworkManager after removing the bootstrap keyfiles")
	}
	n.keyfiles = nil
	log.WithField("keyfiles", len(removed)).Info("bootstrap network removed: the IPAM config carries the node")
}

// applier is the run's applier logging as the calling phase does.
func (n *Network) applier(log *logrus.Entry) *apply.Applier {
	a := *n.env.Applier
	a.Log = log
	return &a
}

// Restore is the way back of a live apply that failed over the bootstrap
// network: the IPAM config is rolled back (err wraps apply.ErrRolledBack),
// the bootstrap profiles are activated again, and err is returned (the run
// ends with exit 75).
func (n *Network) Restore(ctx context.Context, log *logrus.Entry, err error) error {
	if n == nil || len(n.keyfiles) == 0 || !errors.Is(err, apply.ErrRolledBack) {
		return err
	}
	log = logx.OrDiscard(log)
	if aerr := n.applier(log).Activate(context.WithoutCancel(ctx), n.keyfiles); aerr != nil {
		log.WithError(aerr).Warn("activating the bootstrap network again after the rollback")
		return err
	}
	log.Info("IPAM config rolled back: the bootstrap network is up again and kept")
	return err
}
