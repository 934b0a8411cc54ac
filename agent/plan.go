package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// ownedApplier is the apply library with this run's tools and policy,
// which owns the bootstrap network's runtime keyfiles too; built once per
// run (loadConfig, with the local choices), put on a phase's edges by
// onPhase.
func (e *env) ownedApplier(nmstate apply.NmstateChoice, policy netpolicy.Policy) apply.Applier {
	return apply.Applier{
		Tools:   e.tools,
		Nmstate: nmstate,
		Policy:  policy.Owning(bootstrap.RuntimeKeyfiles.Dir + "/" + bootstrap.RuntimeKeyfiles.Prefix),
	}
}

// onPhase is applier a on the edges of the phase that calls it, logging as
// that phase.
func onPhase(a apply.Applier, ph *phase) *apply.Applier {
	a.Files, a.Runner, a.Log = ph.files, ph.runner, ph.log
	return &a
}

// applier is the run's applier (the local config's choices) as phase ph
// runs it.
func (c *configured) applier(ph *phase) *apply.Applier { return onPhase(c.apply, ph) }

// plan is PhasePlan: the rendered config turned into a plan: keyfiles
// (nmstatectl gc for nmstate), the yip applicator, the commands. A nil
// plan: nothing to apply (no config, or the one applied last time, as st
// says). handOver: the plan goes to the toolkit (Applier.HandOver).
func (e *env) plan(ctx context.Context, ph *phase, c *configured, st state.State, net *netConfig, handOver bool) (*apply.Plan, error) {
	if net == nil {
		return nil, nil
	}
	digest := net.rendered.Digest()
	if !e.o.DryRun && digest == st.NetworkDigest && applicatorPresent(ph.files, net.rendered) {
		ph.log.WithField("digest", digest).Info("network config unchanged since the last run: nothing to plan or apply")
		return nil, nil
	}
	a := c.applier(ph)
	a.HandOver = handOver
	planFn := a.Plan
	if c.offline {
		planFn = a.PlanKeyfiles
	}
	plan, err := planFn(ctx, net.rendered)
	var tm *host.ToolMissingError
	var fe *apply.FieldError
	switch {
	case errors.As(err, &tm) && e.o.DryRun:
		// A dry run still shows what it can, and fails as the real run
		// would (docs/reliability.md, "Hostile server"): a dry run that
		// passes must mean the real run passes.
		printRendered(ph.out, net.config, net.rendered)
		fmt.Fprintf(ph.out, "# keyfiles and applicator not shown: %v\n", err)
		return nil, &errclass.ConfigError{Err: err}
	case errors.As(err, &tm), errors.As(err, &fe):
		return nil, &errclass.ConfigError{Err: err}
	case err != nil:
		return nil, err
	}
	if note := plan.GeneratorNote(); note != "" {
		ph.log.WithField("generator", plan.Generator).Info(note)
	}
	return plan, nil
}

// applyInput is what PhaseApply takes: the config's choices, the state so
// far, the network config (nil: none), its plan (nil: nothing to apply)
// and the bootstrap network in use (nil: none).
type applyInput struct {
	conf    *configured
	state   state.State
	net     *netConfig
	plan    *apply.Plan
	bootNet *bootstrap.Network
	// reg is the registration the next boot asks, which the
	// reachability check must reach: the local config's (file, drop-ins,
	// flags), never a URL the reply moved. Nothing persists a moved URL
	// at boot (the state file holds none), so this is every URL the node
	// uses from the next boot on (docs/protocol.md §6.5).
	reg protocol.Registration
}

// printPlan is a dry run's PhaseApply: what would be written and run.
func (e *env) printPlan(ctx context.Context, ph *phase, in applyInput) (*outcome, error) {
	if in.plan != nil {
		printAddresses(ph.out, in.net.config)
		in.plan.Print(ph.out)
	}
	return &outcome{state: in.state}, nil
}

// applyLive is PhaseApply at boot: the plan made the running network and
// persisted; the state it returns records it.
func (e *env) applyLive(ctx context.Context, ph *phase, in applyInput) (*outcome, error) {
	log := ph.log
	st := in.state
	if in.plan == nil {
		if in.net != nil && e.o.RepairDrift && st.NetworkDigest != "" {
			var err error
			if st, err = e.repairDrift(ctx, ph, in); err != nil {
				return nil, in.bootNet.Restore(ctx, log, err)
			}
		}
		in.bootNet.Drop(ctx, log, st.NetworkDigest != "")
		if in.net != nil {
			// The wanted config is the applied one: a config that
			// failed since is no longer asked for.
			st.ClearError()
		}
		return &outcome{state: st}, nil
	}
	reachable := func(ctx context.Context) error { return e.serverReachable(ctx, ph, in.reg) }
	if err := in.conf.applier(ph).ApplyLive(ctx, in.plan, reachable); err != nil {
		return nil, in.bootNet.Restore(ctx, log, err)
	}
	st.ClearError()
	st.NetworkDrift = ""
	st.NetworkDigest = in.plan.Digest()
	st.NetworkState = netreport.StateApplied
	st.NetworkAddresses = state.FormatAddresses(apply.InterfaceAddresses(in.net.rendered))
	in.bootNet.Drop(ctx, log, true)
	return &outcome{state: st, applied: true}, nil
}

// persistPlan is PhaseApply under a --root other than / without
// --apply-live (Options.PersistOnly): the plan is written under the root and
// nothing touches the host's live network. No digest is recorded, so a
// later live run applies it.
func (e *env) persistPlan(ctx context.Context, ph *phase, in applyInput) (*outcome, error) {
	st := in.state
	if in.plan == nil {
		return &outcome{state: st}, nil
	}
	if err := in.conf.applier(ph).Persist(in.plan); err != nil {
		return nil, err
	}
	st.NetworkState = netreport.StateReady
	st.NetworkAddresses = state.FormatAddresses(apply.InterfaceAddresses(in.net.rendered))
	ph.log.WithField("root", e.o.Root).Warn("network config written under --root, not applied live (--root is not /; --apply-live applies it)")
	return &outcome{state: st}, nil
}

// applicatorPresent guards the unchanged-digest shortcut: if someone removed
// the applicator the config is written again.
func applicatorPresent(files host.FS, rd *apply.Rendered) bool {
	if rd.Configurator == protocol.ConfiguratorNone {
		return true
	}
	_, err := files.Stat(host.Applicator)
	return err == nil
}

// serverReachable is the check between a live apply and its commit: the
// registration server the next boot asks (applyInput.reg) must still
// answer over the new network. A plain GET
// of the registration URL is answered by every elemental-operator without
// authentication (docs/protocol.md §1.2).
func (e *env) serverReachable(ctx context.Context, ph *phase, reg protocol.Registration) error {
	// A server restarting at this very moment must not roll back a good
	// network: ask a few times, well inside the checkpoint's timeout.
	window := e.o.ReachabilityWindow
	if window <= 0 {
		window = DefaultReachabilityWindow
	}
	p := retry.Policy{Initial: time.Second, Max: 4 * time.Second, Deadline: window, Clock: e.o.Clock, Retryable: exitcode.Retryable}
	return p.Do(ctx, "reachability check", func(ctx context.Context, _ int) error { return e.reachableOnce(ctx, ph, reg) })
}

// DefaultReachabilityWindow is how long the check after a live apply may
// take; it stays well inside nmstate's checkpoint (60 s by default), which
// rolls back on its own after that.
const DefaultReachabilityWindow = 15 * time.Second

func (e *env) reachableOnce(ctx context.Context, ph *phase, reg protocol.Registration) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := &http.Client{}
	if strings.HasPrefix(reg.URL, "https://") {
		ca, err := e.trustedCA(ph, reg)
		if err != nil {
			return err
		}
		tc, err := protocol.TLSConfig(ca, false)
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
		// A certificate that does not verify is not retried: the same one
		// answers again.
		return protocol.CertificateRejected(fmt.Errorf("registration server unreachable after applying the network config: %w", protocol.RedactError(err, reg.URL)))
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("registration server answers %s after applying the network config", resp.Status)
	}
	return nil
}

func printAddresses(w io.Writer, nc *protocol.NetworkConfig) {
	for _, name := range slices.Sorted(maps.Keys(nc.IPAddresses)) {
		fmt.Fprintf(w, "# address %s = %s\n", name, nc.IPAddresses[name])
	}
}

func printRendered(w io.Writer, nc *protocol.NetworkConfig, rd *apply.Rendered) {
	fmt.Fprintf(w, "# network config: configurator %s\n", rd.Configurator)
	printAddresses(w, nc)
	fmt.Fprintf(w, "--- digested config\n%s", rd.Digested)
	for _, k := range rd.Keyfiles {
		fmt.Fprintf(w, "--- keyfile %s\n%s", k.Name, k.Content)
	}
}

// PrintRender renders nc offline and prints what a dry run would print:
// the digested config, the keyfiles (nmstate's by the generator nmstate
// chooses), the yip applicator and the commands.
func PrintRender(ctx context.Context, w io.Writer, nc *protocol.NetworkConfig, nmstate apply.NmstateChoice) error {
	return printRender(ctx, Options{DryRun: true, Out: w}, nc, nmstate, true, netpolicy.Policy{})
}

// PrintRenderOn is PrintRender for the node whose files are under root
// (`agent render --root`): the plan makes every check a real run on that
// node makes, the keyfile directory's ownership and the uniqueness against
// the profiles on its disk included (docs/apply.md, "agent render").
func PrintRenderOn(ctx context.Context, w io.Writer, root string, nc *protocol.NetworkConfig, nmstate apply.NmstateChoice) error {
	return printRender(ctx, Options{DryRun: true, Out: w, Root: root}, nc, nmstate, false, netpolicy.Policy{})
}

// RenderFor is the node a render plans for.
type RenderFor struct {
	// Root holds the node's files: its disk is checked as a real run
	// checks it (PrintRenderOn). "": another machine, no disk checks.
	Root string
	// ConfigPath is the node's config file under Root, whose network
	// policy judges the config ("": the default policy); Required: its
	// absence is an error (the operator named it).
	ConfigPath string
	Required   bool
}

// PrintRenderFor is PrintRender for node n: its disk checks when it has a
// root, and its own network policy (renderPolicy), so an operator previews
// a node that opts in to a rule as its runs will judge the config.
func PrintRenderFor(ctx context.Context, w io.Writer, nc *protocol.NetworkConfig, nmstate apply.NmstateChoice, n RenderFor) error {
	pol, err := renderPolicy(n.Root, n.ConfigPath, n.Required)
	if err != nil {
		return err
	}
	return printRender(ctx, Options{DryRun: true, Out: w, Root: n.Root}, nc, nmstate, n.Root == "", pol)
}

// printRender is PrintRender with the run's options; offline: the plan is
// for some other machine, not the one under o.Root; pol judges the config.
func printRender(ctx context.Context, o Options, nc *protocol.NetworkConfig, nmstate apply.NmstateChoice, offline bool, pol netpolicy.Policy) error {
	rd, err := apply.Render(nc)
	if err != nil {
		return err
	}
	e := newEnv(o)
	c := &configured{cfg: &protocol.Config{}, nmstate: nmstate, netPolicy: pol, offline: offline, apply: e.ownedApplier(nmstate, pol)}
	net := &netConfig{config: nc, rendered: rd}
	ph := e.phase(PhasePlan, redactor{})
	plan, err := e.plan(ctx, ph, c, state.State{}, net, false)
	if err != nil {
		return err
	}
	_, err = e.printPlan(ctx, ph, applyInput{conf: c, net: net, plan: plan})
	return err
}
