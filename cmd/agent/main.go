// Command agent is nodereg's on-node registration agent. Installed or linked
// as elemental-register it accepts that program's flags and files unchanged.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/systemd"
)

// version is set by the Makefile with -ldflags.
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags is the command line of the register run, elemental-register's
// (PROTOCOL.md 8.1) plus nodereg's own.
type flags struct {
	fs *flag.FlagSet

	url, caCert, auth, configPath, statePath, labelsFile string
	tpmDevice, networkMode, root                         string
	emulate, noSMBIOS, debug, install, reset, noToolkit  bool
	resetNetwork, disableBootEntry, showVersion, dryRun  bool
	seed                                                 int64
	labels                                               labelList
	deadline, networkTimeout                             time.Duration
}

type labelList []string

func (l *labelList) String() string     { return strings.Join(*l, ",") }
func (l *labelList) Set(v string) error { *l = append(*l, v); return nil }

func newFlags(name string, out io.Writer) *flags {
	f := &flags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(out)
	fs.StringVar(&f.url, "registration-url", "", "registration URL (elemental.registration.url)")
	fs.StringVar(&f.caCert, "registration-ca-cert", "", "CA of the registration server: file path or PEM")
	fs.BoolVar(&f.emulate, "emulate-tpm", false, "use the emulated TPM (needs a binary built with make build-emulated)")
	fs.Int64Var(&f.seed, "emulated-tpm-seed", 1, "seed of the emulated TPM; -1 derives it from the SMBIOS UUID")
	fs.BoolVar(&f.noSMBIOS, "no-smbios", false, "send no SMBIOS and no system data")
	fs.StringVar(&f.auth, "auth", "tpm", "authentication: tpm, mac or sys-uuid")
	fs.BoolVar(&f.debug, "debug", false, "debug logging")
	fs.BoolVar(&f.debug, "d", false, "shorthand for --debug")
	fs.StringVar(&f.configPath, "config-path", agent.DefaultConfigPath, "elemental config file")
	fs.StringVar(&f.statePath, "state-path", agent.DefaultStatePath, "state file")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&f.showVersion, "v", false, "shorthand for --version")
	fs.BoolVar(&f.install, "install", false, "register and install (elemental install)")
	fs.BoolVar(&f.reset, "reset", false, "register as new and reset (elemental reset), from recovery")
	fs.BoolVar(&f.resetNetwork, "reset-network", false, "remove the network config this agent wrote")
	fs.BoolVar(&f.noToolkit, "no-toolkit", false, "the node is not an elemental-toolkit image")
	fs.BoolVar(&f.disableBootEntry, "disable-boot-entry", false, "do not create a boot entry at install/reset")
	fs.Var(&f.labels, "label", "label key=value (repeatable, or comma-separated)")
	fs.StringVar(&f.labelsFile, "local-labels-file", agent.DefaultLabelsFile, "flat YAML map of local labels")
	fs.StringVar(&f.root, "root", "/", "prefix for every host path read or written")
	fs.BoolVar(&f.dryRun, "dry-run", false, "talk to the server and render, print what would be written; write and apply nothing")
	fs.StringVar(&f.tpmDevice, "tpm-device", "", "TPM: device path, or unix:///path for swtpm's socket (default /dev/tpmrm0, then /dev/tpm0)")
	fs.StringVar(&f.networkMode, "network-config", "", "how to ask for the network config: auto, embedded or explicit")
	fs.DurationVar(&f.deadline, "deadline", 10*time.Minute, "give up registering after this long (exit 75)")
	fs.DurationVar(&f.networkTimeout, "network-timeout", 10*time.Minute, "give up waiting for addresses after this long (exit 75)")
	return f
}

// overrides returns the registration settings given explicitly on the
// command line: only those win over the config file.
func (f *flags) overrides() agent.Overrides {
	var o agent.Overrides
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "registration-url":
			o.URL = &f.url
		case "registration-ca-cert":
			o.CACert = &f.caCert
		case "emulate-tpm":
			o.EmulateTPM = &f.emulate
		case "emulated-tpm-seed":
			o.EmulatedTPMSeed = &f.seed
		case "no-smbios":
			o.NoSMBIOS = &f.noSMBIOS
		case "auth":
			o.Auth = &f.auth
		case "no-toolkit":
			o.NoToolkit = &f.noToolkit
		case "tpm-device":
			o.TPMDevice = &f.tpmDevice
		case "network-config":
			o.NetworkConfig = &f.networkMode
		}
	})
	return o
}

func newLogger(stderr io.Writer, debug bool) *logrus.Entry {
	l := logrus.New()
	l.Out = stderr
	l.Formatter = &logrus.TextFormatter{DisableTimestamp: os.Getenv("INVOCATION_ID") != "", FullTimestamp: true}
	if debug {
		l.Level = logrus.DebugLevel
	}
	return logrus.NewEntry(l)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "version":
			fmt.Fprintln(stdout, version)
			return agent.ExitOK
		case "render":
			return runRender(args[1:], stdout, stderr)
		case "inventory", "dumpdata", "dump":
			return runInventory(args[1:], stdout, stderr)
		case "register":
			args = args[1:]
		default:
			fmt.Fprintf(stderr, "unknown command %q (commands: register, render, inventory, version)\n", args[0])
			return agent.ExitUsageFlag
		}
	}
	f := newFlags("agent", stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return agent.ExitOK
		}
		return agent.ExitUsageFlag
	}
	if f.showVersion {
		fmt.Fprintln(stdout, version)
		return agent.ExitOK
	}
	if f.install && f.reset {
		fmt.Fprintln(stderr, "--install and --reset are mutually exclusive")
		return agent.ExitUsageFlag
	}
	log := newLogger(stderr, f.debug)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	notifier := systemd.New(log)
	notifier.StartWatchdog(ctx)
	mode := agent.ModeBoot
	switch {
	case f.install:
		mode = agent.ModeInstall
		// Upstream reads the seed image's config at install unless the node
		// is not a toolkit image (PROTOCOL.md 8.2).
		if !f.noToolkit {
			f.configPath, f.statePath = agent.InstallConfigPath, agent.InstallStatePath
		}
	case f.reset:
		mode = agent.ModeReset
	}
	opts := agent.Options{
		Mode:             mode,
		Debug:            f.debug,
		DisableBootEntry: f.disableBootEntry,
		Notifier:         notifier,
		Root:             f.root,
		ConfigPath:       f.configPath,
		StatePath:        f.statePath,
		Overrides:        f.overrides(),
		Labels:           f.labels,
		LabelsFile:       f.labelsFile,
		DryRun:           f.dryRun,
		Deadline:         f.deadline,
		NetworkTimeout:   f.networkTimeout,
		Version:          version,
		Out:              stdout,
		Log:              log,
	}
	if f.resetNetwork {
		err := agent.ResetNetwork(ctx, opts)
		if err != nil {
			log.WithField("exit", agent.ExitCode(err)).Error(err)
		}
		return agent.ExitCode(err)
	}
	res, err := agent.Run(ctx, opts)
	code := agent.ExitCode(err)
	if err != nil {
		log.WithField("exit", code).Error(err)
		return code
	}
	summary := log.WithField("updated", res.Updated)
	if res.TPMHash != "" {
		summary = summary.WithField("tpm-hash", res.TPMHash)
	}
	if res.Configurator != "" {
		summary = summary.WithField("configurator", res.Configurator)
	}
	for _, name := range sortedKeys(res.Addresses) {
		summary = summary.WithField("address."+name, res.Addresses[name])
	}
	summary.Info("registration complete")
	return code
}

// runRender renders a NetworkConfig file offline, with the output of
// --dry-run and no server.
func runRender(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("network-config", "", "NetworkConfig YAML (configurator, ipAddresses, config)")
	if err := fs.Parse(args); err != nil || *file == "" {
		fmt.Fprintln(stderr, "usage: agent render --network-config FILE")
		return agent.ExitUsageFlag
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return agent.ExitConfig
	}
	var nc protocol.NetworkConfig
	if err := yaml.Unmarshal(b, &nc); err != nil {
		fmt.Fprintf(stderr, "render: %s: %v\n", *file, err)
		return agent.ExitConfig
	}
	if err := agent.PrintRender(context.Background(), stdout, &nc); err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return agent.ExitConfig
	}
	return agent.ExitOK
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runInventory prints what the agent would send about this machine:
// SMBIOS, system data, labels, annotations (upstream's dumpdata).
func runInventory(args []string, stdout, stderr io.Writer) int {
	f := newFlags("inventory", stderr)
	// Upstream's dumpdata takes a positional kind and -r/-f flags; the
	// agent prints one JSON document for all of them.
	var rest []string
	for _, a := range args {
		switch a {
		case "hostinfo", "legacy", "smbios", "-r", "--raw":
			continue
		}
		rest = append(rest, a)
	}
	format := f.fs.String("format", "json", "output format (json)")
	f.fs.StringVar(format, "f", "json", "shorthand for --format")
	if err := f.fs.Parse(rest); err != nil {
		return agent.ExitUsageFlag
	}
	b, err := agent.DumpInventory(context.Background(), agent.Options{
		Root: f.root, ConfigPath: f.configPath, LabelsFile: f.labelsFile, Labels: f.labels,
		Overrides: f.overrides(), Version: version, Log: newLogger(stderr, f.debug),
	})
	if err != nil {
		fmt.Fprintf(stderr, "inventory: %v\n", err)
		return agent.ExitCode(err)
	}
	stdout.Write(append(b, '\n'))
	return agent.ExitOK
}
