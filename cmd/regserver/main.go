// Command regserver is the reference registration server: the elemental
// registration endpoint with file-backed inventories and IP pools, for
// labs, demos and tests. See docs/regserver.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	cmdline "github.com/nodereg/nodereg/internal/cli"
)

// Exit codes as the agent's: configuration errors are not worth a restart.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 78
)

// version is set by the Makefile with -ldflags.
var version = "0.1.0-dev"

// HTTP defaults; see docs/regserver.md.
const (
	defaultMaxSessionBytes   = 256 << 10
	defaultMaxConnections    = 4096
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = 30 * time.Second
	// maxHeaderBytes fits a TPM token (an EK certificate and the AK, in
	// base64) many times over.
	maxHeaderBytes = 64 << 10
	// adminMaxConnections bounds the admin listener on its own, so the
	// registration listener's load never locks the admin out.
	adminMaxConnections = 64
)

// command is the whole command tree: the root serves, `store export`
// reads a store, and cobra's help and completion come with it.
func command(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{
		Use:   "regserver --config FILE [flags]",
		Short: "The reference elemental registration server, with file-backed inventories and IP pools",
		Long: `Serves the elemental registration endpoint (rancher/elemental-operator's
protocol) with inventories and address claims in a bbolt store and addresses
from the config file's IP pools: for labs, demos and tests. See
docs/regserver.md.

Prints "listening on URL" (and "admin listening on URL" with --admin-listen)
on stdout once it serves. SIGTERM or SIGINT stops it gracefully.

Exit status: 0 stopped, 64 bad command line, 78 configuration error (a flag
value, the config, the store, a certificate), 1 anything else.`,
		Args:          cmdline.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(*cobra.Command, []string) error {
			if f.showVersion {
				fmt.Fprintln(stdout, version)
				return nil
			}
			if err := f.check(); err != nil {
				fmt.Fprintln(stderr, "regserver:", err)
				return cmdline.Done(exitConfig)
			}
			return cmdline.Done(serve(ctx, f, stdout, stderr))
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	f.bind(root.Flags())
	root.SetHelpCommand(cmdline.HelpCommand())
	root.AddCommand(storeCommand(stdout, stderr), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cmdline.NoArgs,
		Run:   func(*cobra.Command, []string) { fmt.Fprintln(stdout, version) },
	})
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cmdline.Execute(command(ctx, stdout, stderr), args, stderr)
}
