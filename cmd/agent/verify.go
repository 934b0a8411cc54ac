package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	cmdline "github.com/nodereg/nodereg/internal/cli"
)

// verifyCommand is `agent verify` (docs/verify.md): read-only checks, one
// exit-status bit a failed finding.
func (c *cli) verifyCommand() *cobra.Command {
	reg := newRegisterFlags()
	format := newChoice("text", "text", "json")
	cmd := &cobra.Command{
		Use:   "verify [flags]",
		Short: "Check this node: registered, network config persisted and live, server reachable (read-only)",
		Long: `Checks, without writing anything or registering, that this node is what its
last run left: registered (state file), the applicator under /oem matching the
applied config, every applied address on an interface that is up, the active
NetworkManager profiles ours, the registration server reachable with TLS
verified by the stored CA, and no bootstrap network left up.

It takes the registration's flags too, hidden, so nodereg-verify.service can
pass the units' shared $NODEREG_ARGS: --config-path, --state-path and the
config overrides (--registration-url, --registration-ca-cert, ...) are used
as a registration would; the rest (--deadline, --label, ...) change nothing
here. A mode (--install, --reset, --reset-network, --dry-run) is refused.

Exit status: 0 all passed, else the sum of the failed findings' bits:
1 registered, 2 applicator, 4 addresses, 8 profiles, 16 server, 32 bootstrap.
A finding "not checked" (e.g. nmcli not found) says why and sets no bit.`,
		Args: cmdline.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := c.logger(); err != nil {
				return exitcode.Usagef("%v", err)
			}
			for _, mode := range []string{"install", "reset", "reset-network", "dry-run"} {
				if cmd.Flags().Changed(mode) {
					return exitcode.Usagef("verify is read-only: --%s is a registration's mode", mode)
				}
			}
			o := agent.Options{Root: c.root, ConfigPath: reg.configPath, StatePath: reg.statePath, Overrides: reg.overrides(cmd.Flags())}
			rep := agent.Verify(context.Background(), o)
			if err := rep.Write(c.stdout, format.value); err != nil {
				return cmdline.Done(exitcode.TempFail)
			}
			return cmdline.Done(rep.Exit)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.Var(format, "format", "output format: text or json")
	reg.bind(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "format" && f.Name != "config-path" && f.Name != "state-path" {
			f.Hidden = true
		}
	})
	return cmd
}
