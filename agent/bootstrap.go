package agent

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/bootstrap"
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

func (r *run) extend(d time.Duration) {
	if e, ok := r.notify.(extender); ok {
		e.Extend(d)
	}
}

// bootstrapEnv is what package bootstrap takes from this run.
func (r *run) bootstrapEnv(log *logrus.Entry) bootstrap.Env {
	return bootstrap.Env{
		Files: r.files, Applier: r.applier(log), Log: log,
		URL: r.cfg.Elemental.Registration.URL, AppliedDigest: r.appliedDigest, PersistOnly: r.o.PersistOnly,
		Deadline: r.o.Deadline, Extend: r.extend, ProbeInterval: os.Getenv(bootstrap.ProbeIntervalEnv),
	}
}

// bootstrapNetwork is PhaseBootstrap: with a bootstrap config, bring the
// bootstrap network up when needed (or take over the one a previous run
// left up); a dry run prints what it would do.
func (r *run) bootstrapNetwork(ctx context.Context, ph *phase) error {
	if r.boot == nil {
		return nil
	}
	env := r.bootstrapEnv(ph.log)
	if r.o.DryRun {
		return bootstrap.PrintUp(ctx, r.o.Out, r.boot, env)
	}
	n, err := bootstrap.Up(ctx, r.boot, env)
	r.bootNet = n
	return err
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
	r := newRun(Options{DryRun: true, Out: w, Root: root, ConfigPath: configPath})
	c, choice, err := localconfig.ReadBootstrap(r.files, r.o.ConfigPath, nmstate)
	if err != nil {
		return err
	}
	r.nmstate = choice
	return bootstrap.PrintPlan(ctx, w, r.files, c, r.applier(r.phase(PhaseBootstrap).log))
}
