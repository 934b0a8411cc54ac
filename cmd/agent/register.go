package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/systemd"
)

// mode is the run's mode from the flags; at install, the config and state
// paths are the live media's. Upstream reads the seed image's config at
// install unless the node is not a toolkit image (docs/protocol.md §8.1); a
// path given on the command line is the admin's choice and is honoured.
func (f *registerFlags) mode(fs *pflag.FlagSet, log *logrus.Entry) agent.Mode {
	switch {
	case f.install:
		if !f.noToolkit {
			if fs.Changed("config-path") {
				log.WithField("config", f.configPath).Info("install: reading the config given with --config-path, not the live media's " + host.InstallConfigFile)
			} else {
				f.configPath = host.InstallConfigFile
			}
			if !fs.Changed("state-path") {
				f.statePath = host.InstallStateFile
			}
		}
		return agent.ModeInstall
	case f.reset:
		return agent.ModeReset
	}
	return agent.ModeBoot
}

// register is the registration run (the root command and `register`).
func (c *cli) register(cmd *cobra.Command, f *registerFlags) error {
	if err := f.conflicts(); err != nil {
		return exitcode.Usagef("%v", err)
	}
	log, err := c.logger()
	if err != nil {
		return exitcode.Usagef("%v", err)
	}
	ctx, stop := signalContext(log)
	defer stop()
	notifier := systemd.New(log)
	notifier.StartWatchdog(ctx)

	fs := cmd.Flags()
	mode := f.mode(fs, log)
	opts := agent.Options{
		Mode:               mode,
		Debug:              c.debug != 0,
		DisableBootEntry:   f.disableBootEntry,
		Notifier:           notifier,
		Root:               c.root,
		ConfigPath:         f.configPath,
		StatePath:          f.statePath,
		Overrides:          f.overrides(fs),
		Labels:             f.labels,
		LabelsFile:         f.labelsFile,
		DryRun:             f.dryRun,
		PersistOnly:        !host.LiveRoot(c.root) && !f.applyLive,
		Deadline:           f.deadline,
		NetworkTimeout:     f.networkTimeout,
		ReachabilityWindow: f.reachabilityWindow,
		RepairDrift:        f.repairDrift,
		Version:            version,
		Out:                c.stdout,
		Log:                log,
	}
	if f.resetNetwork {
		err := agent.ResetNetwork(ctx, opts)
		return cmdline.Done(outcome(ctx, log, "network reset failed", err, false))
	}
	if f.dryRun {
		log.Warn("dry run: this registers with the server for real (creates or updates this machine's inventory and claims the addresses it will keep); it writes and applies nothing on this node")
	}
	res, err := agent.Run(ctx, opts)
	if err != nil {
		// A phase's failure line carries the error already.
		var pe *agent.PhaseError
		return cmdline.Done(outcome(ctx, log, failedWhat(res, err), err, errors.As(err, &pe)))
	}
	summary := log.WithField("updated", res.Updated)
	if res.TPMHash != "" {
		summary = summary.WithField("tpm-hash", res.TPMHash)
	}
	if res.Configurator != "" {
		summary = summary.WithField("configurator", res.Configurator)
	}
	for _, name := range slices.Sorted(maps.Keys(res.Addresses)) {
		summary = summary.WithField("address."+name, res.Addresses[name])
	}
	if f.dryRun {
		summary.Info("dry run complete: registered, nothing written on this node")
	} else {
		summary.Info("registration complete")
	}
	return cmdline.Done(outcome(ctx, log, "not registered", nil, false))
}

// failedWhat is the final line's account of a failed run: registration's
// outcome, then the phase that failed, separately (docs/cli.md, "Exit codes").
func failedWhat(res *agent.Result, err error) string {
	if res == nil || !res.Registered {
		return "not registered"
	}
	var pe *agent.PhaseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("registered, then %s failed", pe.Phase)
	}
	return "registered, then the run failed"
}
