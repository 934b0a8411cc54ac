package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// The bootstrap network (issue 17, docs/bootstrap.md): on a segment without
// DHCP the agent brings up a temporary address from the local config's
// elemental.registration.bootstrap-network, registers over it, and drops it
// once the IPAM config is applied and the server is reachable over that.

// Bounds of the bootstrap phase: every wait ends.
const (
	// reachDialTimeout bounds the TCP connect that tells whether the
	// server is reachable as the node is.
	reachDialTimeout = 5 * time.Second
	// linkReadyTimeout bounds the wait for carrier before probing.
	linkReadyTimeout = 30 * time.Second
	// bootstrapReachTimeout bounds the wait for the server over the
	// bootstrap network once it is up (NetworkManager's own DAD,
	// ipv4.dad-timeout, runs before the address is usable).
	bootstrapReachTimeout = 30 * time.Second
	// probeIntervalEnv shortens the ARP probe's clock (docs/bootstrap.md):
	// three probes this far apart and a listen of twice it after the last.
	// Unset: RFC 5227's timing, 4-7 s per address.
	probeIntervalEnv = "NODEREG_BOOTSTRAP_PROBE_INTERVAL"
)

// bootstrapDecision is whether the bootstrap network comes up, and why, for
// the log.
type bootstrapDecision struct {
	Needed bool
	Reason string
}

// decideBootstrap is the "bootstrap needed?" rule (docs/bootstrap.md "When
// the bootstrap network is used"): only with a bootstrap config, only on a
// node with no network config of ours applied (no digest in the state, no
// applicator under /oem), and only when the server is not reachable as the
// node is: unreachable is asked last, so a node that needs no bootstrap
// network does not wait for a dial, and returns nil when reachable. A node
// where DHCP works never gets past it.
func decideBootstrap(hasConfig bool, appliedDigest string, applicator bool, unreachable func() error) bootstrapDecision {
	switch {
	case !hasConfig:
		return bootstrapDecision{Reason: "no " + bootstrap.Key + " in the config file"}
	case appliedDigest != "":
		return bootstrapDecision{Reason: "a network config of ours is applied (state file)"}
	case applicator:
		return bootstrapDecision{Reason: "a network applicator of ours is under /oem"}
	}
	err := unreachable()
	if err == nil {
		return bootstrapDecision{Reason: "the registration server is reachable as the node is"}
	}
	return bootstrapDecision{Needed: true, Reason: "the registration server is not reachable (" + err.Error() + ") and no network config of ours is applied"}
}

// serverUnreachable tells whether the registration server cannot be reached
// as the node is: a bounded TCP connect to the URL's host and port. Only a
// network failure counts (no route, no address, a timeout, a name that does
// not resolve); a refused connection means the network works and the
// server does not listen, which a bootstrap address would not change. TLS
// and the protocol are the registration's business.
func serverUnreachable(ctx context.Context, rawURL string, timeout time.Duration) error {
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

// serverUnreachable is serverUnreachable for this run's registration URL.
func (r *run) serverUnreachable(ctx context.Context) error {
	return serverUnreachable(ctx, r.cfg.Elemental.Registration.URL, reachDialTimeout)
}

// checkServerReply refuses, with a warning, bootstrap settings a server
// sent: protocol.Config has no field for them, so they are dropped anyway.
func (r *run) checkServerReply(reply *protocol.Reply) {
	if reply == nil {
		return
	}
	if err := bootstrap.CheckServerReply(reply.Payload); err != nil {
		r.log.WithField("phase", PhaseRegister).Warn(err.Error())
	}
}

// bootstrapNetwork is PhaseBootstrap: decide, and bring the bootstrap
// network up when needed (or take over the one a previous run left up).
func (r *run) bootstrapNetwork(ctx context.Context) error {
	if r.boot == nil {
		return nil
	}
	log := r.log.WithField("phase", PhaseBootstrap)
	if r.o.DryRun {
		return r.printBootstrap(ctx)
	}
	owned, err := bootstrap.RuntimeKeyfiles.Owned(r.files)
	if err != nil {
		return err
	}
	if len(owned) > 0 && r.appliedDigest != "" {
		r.dropLeftoverBootstrap(ctx, log, owned)
	}
	if len(owned) > 0 && r.appliedDigest == "" {
		unreachable := r.serverUnreachable(ctx)
		// A previous run (exit 75) left it up: this run owns it, and
		// drops it once the IPAM config works.
		r.bootKeyfiles = nmPaths(owned)
		if unreachable == nil {
			log.WithField("keyfiles", len(owned)).Info("bootstrap network of a previous run is up: using it")
			return nil
		}
		if r.o.PersistOnly {
			log.Warn("bootstrap network not activated: --root is not / (--apply-live activates it)")
			return nil
		}
		log.WithField("keyfiles", len(owned)).WithField("unreachable", unreachable.Error()).Info("bootstrap keyfiles of a previous run found: activating them again")
		if err := r.applier(PhaseBootstrap).Activate(ctx, r.bootKeyfiles); err != nil {
			return fmt.Errorf("activating the bootstrap network: %w", err)
		}
		r.waitReachable(ctx, log)
		return nil
	}
	d := decideBootstrap(true, r.appliedDigest, r.applicatorOnDisk(), func() error { return r.serverUnreachable(ctx) })
	if !d.Needed {
		log.WithField("why", d.Reason).Info("bootstrap network not needed")
		return nil
	}
	if r.o.PersistOnly {
		log.WithField("why", d.Reason).Warn("bootstrap network needed but not brought up: --root is not / (--apply-live brings it up)")
		return nil
	}
	log.WithField("why", d.Reason).Info("bringing up the bootstrap network")
	plan, err := r.chooseBootstrap(ctx, log)
	if err != nil {
		return err
	}
	kfs, err := r.bootstrapKeyfiles(ctx, plan)
	if err != nil {
		return err
	}
	written, err := plan.Keyfiles.Write(r.files, kfs)
	if err != nil {
		return err
	}
	r.bootKeyfiles = nmPaths(written)
	if err := r.applier(PhaseBootstrap).Activate(ctx, r.bootKeyfiles); err != nil {
		// A profile that does not come up is taken away again: the next
		// run chooses afresh.
		if _, rmErr := plan.Keyfiles.Remove(r.files); rmErr != nil {
			log.WithError(rmErr).Warn("removing the bootstrap keyfiles")
		}
		if rlErr := r.applier(PhaseBootstrap).Activate(context.WithoutCancel(ctx), nil); rlErr != nil {
			log.WithError(rlErr).Warn("reloading NetworkManager")
		}
		r.bootKeyfiles = nil
		return fmt.Errorf("activating the bootstrap network: %w", err)
	}
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
	r.waitReachable(ctx, log)
	return nil
}

// dropLeftoverBootstrap removes the bootstrap profiles of an earlier run
// that ended between applying the IPAM config and dropping them (a crash,
// a kill): a config of ours is applied, so they are no longer needed, and
// once the server answers as the node is, they go and NetworkManager
// reloads. A server away now keeps them for this run (r.bootKeyfiles):
// dropBootstrap removes them after its apply, keepBootstrap brings them back
// after a rollback.
func (r *run) dropLeftoverBootstrap(ctx context.Context, log *logrus.Entry, owned []string) {
	if r.o.PersistOnly {
		return
	}
	if err := r.serverUnreachable(ctx); err != nil {
		r.bootKeyfiles = nmPaths(owned)
		log.WithField("keyfiles", len(owned)).WithField("unreachable", err.Error()).Info("bootstrap keyfiles of an earlier run kept for now: the server is not reachable as the node is")
		return
	}
	removed, err := bootstrap.RuntimeKeyfiles.Remove(r.files)
	if err != nil {
		log.WithError(err).Warn("removing the bootstrap keyfiles of an earlier run")
	}
	if err := r.applier(PhaseBootstrap).Activate(ctx, nil); err != nil {
		log.WithError(err).Warn("reloading NetworkManager after removing the bootstrap keyfiles")
	}
	log.WithField("keyfiles", len(removed)).Info("bootstrap keyfiles of an earlier run removed: a network config of ours is applied and the server is reachable")
}

// chooseBootstrap reads the machine's facts, raises the probe interfaces and
// picks the addresses with real duplicate address detection, under the
// run's --deadline and extending systemd's start timeout before each wait
// (agent/bootstrap_walk.go).
func (r *run) chooseBootstrap(ctx context.Context, log *logrus.Entry) (*bootstrap.Plan, error) {
	facts, err := bootstrap.ReadFacts(r.files)
	if err != nil {
		return nil, err
	}
	preview, err := bootstrap.Preview(r.boot, facts)
	if err != nil {
		return nil, err
	}
	prober, err := probeTiming(os.Getenv(probeIntervalEnv))
	if err != nil {
		return nil, err
	}
	w := &walkingProber{real: prober, perProbe: probeMaxDuration(prober), extend: r.extend, earlier: r.readHeld()}
	if len(w.earlier) > 0 {
		log.WithField("known-held", len(w.earlier)).Info("an earlier run ran out of time walking the range: its held addresses are not probed again")
	}
	return r.boundedChoice(ctx, w, func(ctx context.Context) (*bootstrap.Plan, error) {
		for _, c := range preview.Choices {
			if c.Interface == "" {
				continue
			}
			r.extend(linkReadyTimeout)
			lctx, cancel := context.WithTimeout(ctx, linkReadyTimeout)
			raised, err := bootstrap.LinkReady(lctx, c.Interface)
			cancel()
			if err != nil {
				return nil, err
			}
			if raised {
				log.WithField("interface", c.Interface).Info("link was down: set it up to probe")
			}
		}
		return bootstrap.Choose(ctx, r.boot, facts, w)
	})
}

// probeTiming is the ARP prober, RFC 5227's timing unless the interval is
// set (NODEREG_BOOTSTRAP_PROBE_INTERVAL, e.g. 200ms): still three probes and
// a listen after the last, on a shorter clock.
func probeTiming(interval string) (*bootstrap.ARPProber, error) {
	if interval == "" {
		// RFC 5227's constants, spelled out so the start timeout can be
		// extended by a probe's maximum.
		return &bootstrap.ARPProber{ProbeWait: time.Second, ProbeNum: 3, ProbeMin: time.Second, ProbeMax: 2 * time.Second, AnnounceWait: 2 * time.Second}, nil
	}
	d, err := time.ParseDuration(interval)
	if err != nil || d <= 0 || d > 10*time.Second {
		return nil, configErr("%s=%q: want a duration between 0 and 10s", probeIntervalEnv, interval)
	}
	return &bootstrap.ARPProber{ProbeWait: d, ProbeNum: 3, ProbeMin: d, ProbeMax: d, AnnounceWait: 2 * d}, nil
}

// bootstrapKeyfiles renders the plan's network config with the code that
// renders the server's (apply.Render), and gets its keyfiles the way the
// IPAM config's are made (the same applier and keyfile generator).
func (r *run) bootstrapKeyfiles(ctx context.Context, plan *bootstrap.Plan) ([]apply.Keyfile, error) {
	rendered, err := apply.Render(plan.Network)
	if err != nil {
		return nil, err
	}
	p, err := r.applier(PhaseBootstrap).PlanKeyfiles(ctx, rendered)
	if err != nil {
		return nil, err
	}
	// The bootstrap keyfiles go live the keyfile way whatever made them
	// (so not GeneratorNote's words); which generator ran is worth a line.
	if p.Generator != apply.GeneratorNone {
		r.log.WithField("phase", PhaseBootstrap).WithField("generator", p.Generator).
			WithField("keyfiles", len(p.Keyfiles)).Info("bootstrap keyfiles generated")
	}
	return bootstrapUUIDs(p.Keyfiles), nil
}

// nmPaths are the keyfiles as NetworkManager names them: its runtime
// directory is compiled in (/run/NetworkManager/system-connections), so
// under a scratch --root it still reports /run/…, and activation looks the
// profiles up by that name.
func nmPaths(hostPaths []string) []string {
	out := make([]string, 0, len(hostPaths))
	for _, p := range hostPaths {
		out = append(out, path.Join(bootstrap.RuntimeKeyfiles.Dir, path.Base(p)))
	}
	return out
}

// waitReachable waits, bounded, for the server over the bootstrap network;
// a server that stays away is the registration's to report (with its
// retries), so this only warns.
func (r *run) waitReachable(ctx context.Context, log *logrus.Entry) {
	r.extend(bootstrapReachTimeout)
	ctx, cancel := context.WithTimeout(ctx, bootstrapReachTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := r.serverUnreachable(ctx)
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

// applicatorOnDisk: /oem holds a network applicator of ours.
func (r *run) applicatorOnDisk() bool {
	_, err := r.files.Stat(apply.DefaultPaths().Applicator)
	return err == nil
}

// dropBootstrap removes the bootstrap profiles once a network config of ours
// is applied and the server was reachable over it, and reloads
// NetworkManager, which drops the profiles whose files are gone and takes
// down a connection still active on one (state reason connection-removed);
// usually the IPAM profile has taken the device already. Failures are warnings: the IPAM config works,
// and /run is gone at the next boot.
func (r *run) dropBootstrap(ctx context.Context) {
	if len(r.bootKeyfiles) == 0 {
		return
	}
	log := r.log.WithField("phase", PhaseApply)
	if r.state.NetworkDigest == "" {
		log.Warn("bootstrap network kept: no network config of ours is applied (it is gone at the next boot)")
		return
	}
	removed, err := bootstrap.RuntimeKeyfiles.Remove(r.files)
	if err != nil {
		log.WithError(err).Warn("removing the bootstrap keyfiles")
	}
	if err := r.applier(PhaseApply).Activate(ctx, nil); err != nil {
		log.WithError(err).Warn("reloading NetworkManager after removing the bootstrap keyfiles")
	}
	r.bootKeyfiles = nil
	log.WithField("keyfiles", len(removed)).Info("bootstrap network removed: the IPAM config carries the node")
}

// keepBootstrap is the way back of a live apply that failed over the
// bootstrap network: the IPAM config is rolled back, the bootstrap profiles
// are activated again, and the run ends with err (exit 75).
func (r *run) keepBootstrap(ctx context.Context, err error) error {
	if len(r.bootKeyfiles) == 0 || !errors.Is(err, apply.ErrRolledBack) {
		return err
	}
	log := r.log.WithField("phase", PhaseApply)
	if aerr := r.applier(PhaseApply).Activate(context.WithoutCancel(ctx), r.bootKeyfiles); aerr != nil {
		log.WithError(aerr).Warn("activating the bootstrap network again after the rollback")
		return err
	}
	log.Info("IPAM config rolled back: the bootstrap network is up again and kept")
	return err
}

// registrationYAML is the new system's registration config: the run's
// registration and, when the local config has one, its bootstrap block, so
// an install or reset does not lose it (protocol.Config has no field for it).
func registrationYAML(reg protocol.Registration, boot *bootstrap.Config) ([]byte, error) {
	var doc any = reg
	if boot != nil {
		b, err := yaml.Marshal(reg)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		m["bootstrap-network"] = boot
		doc = m
	}
	return yaml.Marshal(map[string]any{"elemental": map[string]any{"registration": doc}})
}

// printBootstrap is a dry run's PhaseBootstrap: the profile this machine
// would use and the address it would try first; nothing probed or written.
func (r *run) printBootstrap(ctx context.Context) error {
	owned, err := bootstrap.RuntimeKeyfiles.Owned(r.files)
	if err != nil {
		return err
	}
	d := decideBootstrap(true, r.appliedDigest, r.applicatorOnDisk(), func() error { return r.serverUnreachable(ctx) })
	switch {
	case len(owned) > 0:
		fmt.Fprintf(r.o.Out, "# bootstrap network: %d keyfile(s) of a previous run present; this run would use them\n", len(owned))
	case d.Needed:
		fmt.Fprintf(r.o.Out, "# bootstrap network: would be brought up (%s)\n", d.Reason)
	default:
		fmt.Fprintf(r.o.Out, "# bootstrap network: not needed (%s); if it were:\n", d.Reason)
	}
	return PrintBootstrapPlan(ctx, r.o.Out, r.files, r.boot, r.applier(PhaseBootstrap))
}

// PrintBootstrap is `agent render --bootstrap`: the bootstrap profile the
// machine under root would use (config file at configPath under root) and
// the address it would try first, without probing, dialling or writing.
// An nmstate template's keyfile generator is chosen as a run chooses it:
// nmstate (--nmstate; nil when not given), else the file's
// elemental.registration.nmstate, else auto.
func PrintBootstrap(ctx context.Context, w io.Writer, root, configPath string, nmstate *string) error {
	r := newRun(Options{DryRun: true, Out: w, Root: root, ConfigPath: configPath})
	c, choice, err := localconfig.ReadBootstrap(r.files, r.o.ConfigPath, nmstate)
	if err != nil {
		return err
	}
	r.nmstate = choice
	return PrintBootstrapPlan(ctx, w, r.files, c, r.applier(PhaseBootstrap))
}

// PrintBootstrapPlan prints bootstrap.Preview's plan and the keyfiles it
// renders to, with where they go and how they are activated.
func PrintBootstrapPlan(ctx context.Context, w io.Writer, files host.FS, c *bootstrap.Config, a *apply.Applier) error {
	facts, err := bootstrap.ReadFacts(files)
	if err != nil {
		return err
	}
	plan, err := bootstrap.Preview(c, facts)
	if err != nil {
		return err
	}
	if err := plan.Print(w); err != nil {
		return err
	}
	rendered, err := apply.Render(plan.Network)
	if err != nil {
		return err
	}
	p, err := a.PlanKeyfiles(ctx, rendered)
	var tm *host.ToolMissingError
	if errors.As(err, &tm) {
		fmt.Fprintf(w, "# bootstrap keyfiles not shown: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	if gen := generatorWords[p.Generator]; gen != "" {
		fmt.Fprintf(w, "# bootstrap keyfiles by %s\n", gen)
	}
	kfs := bootstrapUUIDs(p.Keyfiles)
	for _, kf := range kfs {
		fmt.Fprintf(w, "# ---- bootstrap keyfile: %s (%04o, gone at reboot)\n%s", path.Join(plan.Keyfiles.Dir, plan.Keyfiles.Prefix+kf.Name), plan.Keyfiles.Mode, kf.Content)
		if len(kf.Content) > 0 && kf.Content[len(kf.Content)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "# ---- bootstrap commands")
	fmt.Fprintln(w, "nmcli connection reload")
	for _, kf := range kfs {
		fmt.Fprintf(w, "nmcli connection up uuid '<UUID of %s>'\n", path.Join(plan.Keyfiles.Dir, plan.Keyfiles.Prefix+kf.Name))
	}
	return nil
}

// generatorWords name apply's keyfile generators for the bootstrap
// printout (apply.Plan.GeneratorNote's words also say how an IPAM config
// goes live, which is not how the bootstrap keyfiles do).
var generatorWords = map[string]string{
	apply.GeneratorBuiltin:    "the built-in nmstate translator",
	apply.GeneratorNmstatectl: "nmstatectl gc",
	apply.GeneratorNmc:        "nmc generate",
}
