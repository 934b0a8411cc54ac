package agent

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// The bootstrap network (docs/bootstrap.md) is package bootstrap's: it
// decides, chooses, writes, activates and later drops it (bootstrap.Up and
// the *bootstrap.Network it returns). The agent says only when: in its own
// phase right before register, after the network-free TPM work, and at
// the end of the apply phase.

// extender is the part of the systemd notifier that pushes the start
// timeout (EXTEND_TIMEOUT_USEC); a notifier without it extends nothing.
type extender interface{ Extend(time.Duration) }

func (e *env) extend(d time.Duration) {
	if x, ok := e.notify.(extender); ok {
		x.Extend(d)
	}
}

// bootstrapEnv is what package bootstrap takes from this run.
func (e *env) bootstrapEnv(ph *phase, c *configured, appliedDigest string) bootstrap.Env {
	return bootstrap.Env{
		Files: ph.files, Applier: c.applier(ph), Log: ph.log,
		URL: c.cfg.Elemental.Registration.URL, AppliedDigest: appliedDigest, PersistOnly: e.o.PersistOnly,
		Deadline: e.o.Deadline, Extend: e.extend, ProbeInterval: e.probeInterval,
	}
}

// bootstrapNetwork is PhaseBootstrap: with a bootstrap config, bring the
// bootstrap network up when needed (or take over the one a previous run
// left up); a dry run prints what it would do. The network in use comes
// back even with an error, so the apply phase can drop it.
func (e *env) bootstrapNetwork(ctx context.Context, ph *phase, c *configured, p *prior) (*bootstrap.Network, error) {
	if c.boot == nil {
		return nil, nil
	}
	env := e.bootstrapEnv(ph, c, p.appliedDigest)
	if e.o.DryRun {
		return nil, bootstrap.PrintUp(ctx, ph.out, c.boot, env)
	}
	return bootstrap.Up(ctx, c.boot, env)
}

// checkServerReply refuses, with a warning, bootstrap settings a server
// sent: protocol.Config has no field for them, so they are dropped anyway.
func checkServerReply(log *logrus.Entry, reply *protocol.Reply) {
	if reply == nil {
		return
	}
	if err := bootstrap.CheckServerReply(reply.Doc); err != nil {
		log.Warn(err.Error())
	}
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

// PrintBootstrap is `agent render --bootstrap`: the bootstrap profile the
// machine under root would use (config file at configPath under root) and
// the address it would try first, without probing, dialling or writing.
// An nmstate template's keyfile generator is chosen as a run chooses it:
// nmstate (--nmstate; nil when not given), else the file's
// elemental.registration.nmstate, else auto.
func PrintBootstrap(ctx context.Context, w io.Writer, root, configPath string, nmstate *string) error {
	e := newEnv(Options{DryRun: true, Out: w, Root: root, ConfigPath: configPath})
	ph := e.phase(PhaseBootstrap, redactor{})
	c, choice, err := localconfig.ReadBootstrap(ph.files, e.o.ConfigPath, nmstate)
	if err != nil {
		return err
	}
	return bootstrap.PrintPlan(ctx, w, ph.files, c, onPhase(e.ownedApplier(choice, netpolicy.Policy{}), ph))
}

// PrintBootstrapFor is `agent render --bootstrap -f FILE`: the bootstrap
// profile of c for the machine the facts describe (nil: the one under
// root), and the address it would try first. Described, nothing of this
// host is read but the keyfile generator (nmstate: nmstatectl gc when
// found, as choice says).
func PrintBootstrapFor(ctx context.Context, w io.Writer, c *bootstrap.Config, facts *bootstrap.Facts, root string, choice apply.NmstateChoice) error {
	if facts == nil {
		e := newEnv(Options{DryRun: true, Out: w, Root: root})
		ph := e.phase(PhaseBootstrap, redactor{})
		return bootstrap.PrintPlanNoting(ctx, w, ph.files, "read under --root "+root, c, onPhase(e.ownedApplier(choice, netpolicy.Policy{}), ph))
	}
	fmt.Fprintf(w, "# machine: %s (--set)\n", *facts)
	e := newEnv(Options{DryRun: true, Out: w})
	ph := e.phase(PhaseBootstrap, redactor{})
	return bootstrap.PrintPlanFor(ctx, w, *facts, c, onPhase(e.ownedApplier(choice, netpolicy.Policy{}), ph))
}
