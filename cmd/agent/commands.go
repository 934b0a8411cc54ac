package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/localconfig"
	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logging"
)

// command is the whole command tree.
func (c *cli) command() *cobra.Command {
	reg := newRegisterFlags()
	c.lastRegister = reg
	var showVersion bool
	root := &cobra.Command{
		Use:   c.name + " [register] [flags]",
		Short: "nodereg's registration agent: register this machine and apply its network config",
		Long: `Registers this machine with an elemental registration server (or updates
its registration), gets its network config with IPAM addresses, writes it under
/oem and applies it. With no command it registers.

Exit status: 0 done, 64 bad command line, 75 try again later, 78 needs a
person, 130/143 stopped by SIGINT/SIGTERM.`,
		Args:          cmdline.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Fprintln(c.stdout, version)
				return nil
			}
			return c.register(cmd, reg)
		},
	}
	// A --root that is not a directory cannot mean anything: refused with
	// the other command-line errors, before any run.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("root") {
			return nil
		}
		if fi, err := host.StatInput(c.root); err != nil || !fi.IsDir() {
			return fmt.Errorf("--root %s: not a directory", c.root)
		}
		return nil
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	// No cobra template is set anywhere: executing one links text/template,
	// whose reflection keeps every method of every type in the binary
	// (+2.3 MB); cobra's built-in help and usage are plain functions.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.Usagef("%v", err) })
	c.logFormat = newChoice("", logging.FormatText, logging.FormatJSON, logging.FormatJournal)
	pf := root.PersistentFlags()
	pf.StringVar(&c.root, "root", "/", "prefix for every host path read or written, also those named in the config file")
	pf.VarP(&c.debug, "debug", "d", "debug logging: the conversation step by step; --debug=all adds the libraries' own messages")
	pf.Lookup("debug").NoOptDefVal = "true"
	pf.Var(c.logFormat, "log-format", "log format: text or json (default: journal fields under systemd, else text)")
	reg.bind(root.Flags())
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "print the version and exit")

	registerCmd := &cobra.Command{
		Use:   "register [flags]",
		Short: "Register (or update) and apply the network config (the default command)",
		Args:  cmdline.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return c.register(cmd, reg) },
	}
	reg.bind(registerCmd.Flags())

	root.SetHelpCommand(cmdline.HelpCommand())
	root.AddCommand(registerCmd, c.renderCommand(), c.inventoryCommand(), c.verifyCommand(), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cmdline.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(c.stdout, version) },
	})
	root.AddCommand(c.extraCommands()...)
	return root
}

// registerFlags is the command line of a registration: elemental-register's
// flags (docs/protocol.md §8.1) plus nodereg's own.
type registerFlags struct {
	url, caCert, configPath, statePath, labelsFile string
	auth, networkMode, nmstate                     *choice
	tpmDevice                                      tpmDevice
	emulate, noSMBIOS, noToolkit                   bool
	install, reset, resetNetwork, disableBootEntry bool
	dryRun, applyLive, repairDrift                 bool
	seed                                           int64
	labels                                         labelList
	deadline, networkTimeout, reachabilityWindow   time.Duration
}

func newRegisterFlags() *registerFlags {
	return &registerFlags{
		auth:        newChoice("tpm", "tpm", "mac", "sys-uuid"),
		networkMode: newChoice("auto", "auto", "embedded", "explicit"),
		nmstate:     newNmstateChoice(),
	}
}

// bind declares the flags on fs; root and `register` share one struct,
// and only the command that runs parses its flags.
func (f *registerFlags) bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVar(&f.url, "registration-url", "", "registration URL (elemental.registration.url)")
	fs.StringVar(&f.caCert, "registration-ca-cert", "", "CA of the registration server: file path (under --root) or PEM text")
	fs.Var(f.auth, "auth", "authentication: tpm, mac or sys-uuid")
	fs.BoolVar(&f.emulate, "emulate-tpm", false, "use the emulated TPM (needs a binary built with make build-emulated)")
	fs.Int64Var(&f.seed, "emulated-tpm-seed", 1, "seed of the emulated TPM; -1 derives it from the SMBIOS UUID")
	fs.BoolVar(&f.noSMBIOS, "no-smbios", false, "send no SMBIOS and no system data")
	fs.StringVar(&f.configPath, "config-path", host.ConfigFile, "elemental config file (under --root)")
	fs.StringVar(&f.statePath, "state-path", host.StateFile, "state file (under --root)")
	fs.Var(&f.labels, "label", "label key=value (repeatable, or comma-separated)")
	fs.StringVar(&f.labelsFile, "local-labels-file", host.LabelsFile, "flat YAML map of local labels (under --root)")
	for _, m := range f.modes() {
		fs.BoolVar(m.on, m.name, false, m.usage)
	}
	fs.BoolVar(&f.noToolkit, "no-toolkit", false, "the node is not an elemental-toolkit image")
	fs.BoolVar(&f.disableBootEntry, "disable-boot-entry", false, "do not create a boot entry at install/reset")
	fs.BoolVar(&f.dryRun, "dry-run", false, "register for real, then print what would be written and applied; write and apply nothing on this node")
	fs.BoolVar(&f.repairDrift, "repair-drift", false, "when the server's config is the one applied, check the live network against it and apply it again if it drifted (the update timer's run)")
	fs.BoolVar(&f.applyLive, "apply-live", false, "with a --root other than /, still apply live: run nmstatectl/nmcli against this host's NetworkManager and the elemental toolkit (the boot simulation)")
	fs.Var(&f.tpmDevice, "tpm-device", "TPM: device path, or unix:///path for swtpm's socket (default /dev/tpmrm0, then /dev/tpm0)")
	fs.Var(f.networkMode, "network-config", "how to ask for the network config: auto, embedded or explicit")
	fs.Var(f.nmstate, "nmstate", nmstateUsage+" (elemental.registration.nmstate)")
	fs.DurationVar(&f.deadline, "deadline", 10*time.Minute, "give up registering after this long (exit 75)")
	fs.DurationVar(&f.networkTimeout, "network-timeout", 10*time.Minute, "give up waiting for addresses after this long (exit 75)")
	fs.DurationVar(&f.reachabilityWindow, "reachability-window", agent.DefaultReachabilityWindow, "after a live network apply, roll it back unless the registration server answers within this long")
}

// overrides are the registration settings given on the command line: only
// those win over the config file (docs/protocol.md §8.2).
func (f *registerFlags) overrides(fs *pflag.FlagSet) localconfig.Overrides {
	var o localconfig.Overrides
	fs.Visit(func(fl *pflag.Flag) {
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
			o.Auth = &f.auth.value
		case "no-toolkit":
			o.NoToolkit = &f.noToolkit
		case "tpm-device":
			v := string(f.tpmDevice)
			o.TPMDevice = &v
		case "network-config":
			o.NetworkConfig = &f.networkMode.value
		case "nmstate":
			o.Nmstate = &f.nmstate.value
		}
	})
	return o
}

// modeFlag is one of upstream's mode flags.
type modeFlag struct {
	on          *bool
	name, usage string
}

// modes are the mode flags, of which a run takes one at the most
// (conflicts).
func (f *registerFlags) modes() []modeFlag {
	return []modeFlag{
		{&f.install, "install", "register and install (elemental install), from live media"},
		{&f.reset, "reset", "register as new and reset (elemental reset), from recovery"},
		{&f.resetNetwork, "reset-network", "remove the network config this agent wrote, and nothing else"},
	}
}

// conflicts refuses flag combinations that cannot mean anything.
func (f *registerFlags) conflicts() error {
	var given []string
	for _, m := range f.modes() {
		if *m.on {
			given = append(given, "--"+m.name)
		}
	}
	if len(given) > 1 {
		return fmt.Errorf("%s are mutually exclusive", strings.Join(given, " and "))
	}
	return nil
}
