package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// applier is the apply library on this run's edges, logging as phase p.
func (r *run) applier(log *logrus.Entry) *apply.Applier {
	return &apply.Applier{
		Runner:  r.runner,
		Files:   r.files,
		Tools:   host.ToolsFromEnv(os.Getenv),
		Nmstate: r.nmstate,
		Log:     log,
		Policy:  r.netPolicy.Owning(bootstrap.RuntimeKeyfiles.Dir + "/" + bootstrap.RuntimeKeyfiles.Prefix),
	}
}

// plan turns the rendered config into a plan: keyfiles (nmstatectl gc for
// nmstate), the yip applicator, the commands. Dry runs print it. A nil
// plan: nothing to apply (no config, or the one applied last time).
func (r *run) plan(ctx context.Context, ph *phase, net *fetched) (*apply.Plan, error) {
	if net == nil {
		return nil, nil
	}
	r.result.Digest = net.rendered.Digest()
	if !r.o.DryRun && r.result.Digest == r.state.NetworkDigest && r.applicatorPresent(net.rendered) {
		ph.log.WithField("digest", r.result.Digest).Info("network config unchanged since the last run: nothing to plan or apply")
		return nil, nil
	}
	a := r.applier(ph.log)
	planFn := a.Plan
	if r.offline {
		planFn = a.PlanKeyfiles
	}
	plan, err := planFn(ctx, net.rendered)
	var tm *host.ToolMissingError
	var fe *apply.FieldError
	switch {
	case errors.As(err, &tm) && r.o.DryRun:
		// A dry run still shows what it can, and fails as the real run
		// would (issue 21, item 8): a dry run that passes must mean the
		// real run passes.
		printRendered(r.o.Out, net.config, net.rendered)
		fmt.Fprintf(r.o.Out, "# keyfiles and applicator not shown: %v\n", err)
		return nil, &ConfigError{Err: err}
	case errors.As(err, &tm), errors.As(err, &fe):
		return nil, &ConfigError{Err: err}
	case err != nil:
		return nil, err
	}
	if note := plan.GeneratorNote(); note != "" {
		ph.log.WithField("generator", plan.Generator).Info(note)
	}
	return plan, nil
}

// printPlan is a dry run's PhaseApply: what would be written and run.
func (r *run) printPlan(ctx context.Context, _ *phase, net *fetched, plan *apply.Plan) error {
	if plan == nil {
		return nil
	}
	printAddresses(r.o.Out, net.config)
	plan.Print(r.o.Out)
	return nil
}

// applyLive makes the plan the running network and persists it (boot mode).
func (r *run) applyLive(ctx context.Context, ph *phase, net *fetched, plan *apply.Plan) error {
	log := ph.log
	if plan == nil {
		if net != nil && r.o.RepairDrift && r.state.NetworkDigest != "" {
			if err := r.repairDrift(ctx, ph, net); err != nil {
				return r.bootNet.Restore(ctx, log, err)
			}
		}
		r.bootNet.Drop(ctx, log, r.state.NetworkDigest != "")
		if net != nil {
			// The wanted config is the applied one: a config that
			// failed since is no longer asked for.
			r.state.ClearError()
		}
		return nil
	}
	if err := r.applier(log).ApplyLive(ctx, plan, r.serverReachable); err != nil {
		return r.bootNet.Restore(ctx, log, err)
	}
	r.state.ClearError()
	r.state.NetworkDrift = ""
	r.state.NetworkDigest = plan.Digest()
	r.state.NetworkState = netreport.StateApplied
	r.state.NetworkAddresses = state.FormatAddresses(apply.InterfaceAddresses(net.rendered))
	r.result.Applied = true
	r.bootNet.Drop(ctx, log, true)
	return nil
}

// persistPlan is PhaseApply under a --root other than / without
// --apply-live (Options.PersistOnly): the plan is written under the root and
// nothing touches the host's live network. No digest is recorded, so a
// later live run applies it.
func (r *run) persistPlan(ctx context.Context, ph *phase, net *fetched, plan *apply.Plan) error {
	if plan == nil {
		return nil
	}
	if err := r.applier(ph.log).Persist(plan); err != nil {
		return err
	}
	r.state.NetworkState = netreport.StateReady
	r.state.NetworkAddresses = state.FormatAddresses(apply.InterfaceAddresses(net.rendered))
	ph.log.WithField("root", r.o.Root).Warn("network config written under --root, not applied live (--root is not /; --apply-live applies it)")
	return nil
}

// applicatorPresent guards the unchanged-digest shortcut: if someone removed
// the applicator the config is written again.
func (r *run) applicatorPresent(rd *apply.Rendered) bool {
	if rd.Configurator == protocol.ConfiguratorNone {
		return true
	}
	_, err := r.files.Stat(apply.DefaultPaths().Applicator)
	return err == nil
}

// serverReachable is the check between a live apply and its commit: the
// registration server must still answer over the new network. A plain GET
// of the registration URL is answered by every elemental-operator without
// authentication (docs/protocol.md §1.2).
func (r *run) serverReachable(ctx context.Context) error {
	// A server restarting at this very moment must not roll back a good
	// network: ask a few times, well inside the checkpoint's timeout.
	window := r.o.ReachabilityWindow
	if window <= 0 {
		window = DefaultReachabilityWindow
	}
	p := retry.Policy{Initial: time.Second, Max: 4 * time.Second, Deadline: window, Clock: r.o.Clock, Retryable: exitcode.Retryable}
	return p.Do(ctx, "reachability check", func(ctx context.Context, _ int) error { return r.reachableOnce(ctx) })
}

// DefaultReachabilityWindow is how long the check after a live apply may
// take; it stays well inside nmstate's checkpoint (60 s by default), which
// rolls back on its own after that.
const DefaultReachabilityWindow = 15 * time.Second

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
	r := newRun(o)
	r.netPolicy = pol
	r.state = &state.State{}
	r.nmstate = nmstate
	r.offline = offline
	net := &fetched{config: nc, rendered: rd}
	ph := r.phase(PhasePlan)
	plan, err := r.plan(ctx, ph, net)
	if err != nil {
		return err
	}
	return r.printPlan(ctx, ph, net, plan)
}
