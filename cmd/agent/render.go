package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/apply"
	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// maxRenderInput bounds the file render reads; a network config is a few
// kilobytes.
const maxRenderInput = 1 << 20

func (c *cli) renderCommand() *cobra.Command {
	var file, configPath string
	var boot bool
	nmstate := newNmstateChoice()
	cmd := &cobra.Command{
		Use:   "render --input FILE | --bootstrap",
		Short: "Render a NetworkConfig file offline: what --dry-run prints, with no server",
		Long: `Renders a NetworkConfig YAML file (configurator, ipAddresses, config) and
prints what a dry run prints: the digested config, the keyfiles, the yip
applicator and the commands. Talks to no server; writes nothing. A key the
NetworkConfig does not have is an error. An nmstate config's keyfiles come
from nmstatectl gc when it is installed, else from the built-in translator
(--nmstate chooses); the output says which. Without --root the plan is
for some other machine: the checks on this machine's disk (keyfiles that
would replace files the agent does not own, UUIDs and ids of the profiles
NetworkManager loads) are not made. With --root they are made on the node
under it, exactly as a run there would. With --bootstrap, an unset
--nmstate leaves the choice to the config file's elemental.registration.nmstate
(else auto), as register does.

The config is judged by the node's network policy: with --root, that of
its config file (--config-path under the root:
elemental.registration.network-policy), so a node that allows a rule is
previewed as it will run; a --config-path given names the file wherever
--root points (missing: an error). Otherwise, and when the node has no
config file, by the default policy.

With --bootstrap it prints the bootstrap network of the config file
(elemental.registration.bootstrap-network) as this machine would bring it
up on a segment without DHCP: the address it would try first and where it
comes from, and the runtime keyfiles. Nothing is probed or written.`,
		Args: cmdline.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			switch {
			case boot && file != "":
				return errors.New("--bootstrap and --input are mutually exclusive")
			case boot:
				var flag *string // nil: the config file's elemental.registration.nmstate, else auto
				if cmd.Flags().Changed("nmstate") {
					flag = &nmstate.value
				}
				err = agent.PrintBootstrap(context.Background(), c.stdout, c.root, configPath, flag)
			case file == "":
				return errors.New(`required flag(s) "input" not set (or --bootstrap)`)
			default:
				// --root: the node under it, its disk checked and its config
				// file's policy judging the config; else another machine
				// (default policy, unless --config-path names its file).
				var node agent.RenderFor
				if cmd.Flags().Changed("root") {
					node.Root, node.ConfigPath = c.root, configPath
				}
				if cmd.Flags().Changed("config-path") {
					node.ConfigPath, node.Required = configPath, true
				}
				err = render(c.stdout, file, node, apply.NmstateChoice(nmstate.value))
			}
			if err != nil {
				fmt.Fprintf(c.stderr, "render: %v\n", err)
				return cmdline.Done(exitcode.Of(err))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "input", "f", "", "NetworkConfig YAML file (required unless --bootstrap)")
	// The old spelling, kept working but not shown: on register
	// --network-config is a mode (auto, embedded, explicit), not a file.
	cmd.Flags().StringVar(&file, "network-config", "", "old spelling of --input")
	_ = cmd.Flags().MarkHidden("network-config")
	cmd.Flags().BoolVar(&boot, "bootstrap", false, "print the bootstrap network of the config file (--config-path) for this machine")
	cmd.Flags().StringVar(&configPath, "config-path", host.ConfigFile, "elemental config file (under --root): its network policy judges the config; with --bootstrap, its bootstrap network is printed")
	cmd.Flags().Var(nmstate, "nmstate", nmstateUsage)
	return cmd
}

func render(w io.Writer, file string, node agent.RenderFor, nmstate apply.NmstateChoice) error {
	b, err := host.ReadInput(file, maxRenderInput)
	if err != nil {
		return &errclass.ConfigError{Err: err}
	}
	var nc protocol.NetworkConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&nc); err != nil && !errors.Is(err, io.EOF) {
		return &errclass.ConfigError{Err: fmt.Errorf("%s: %w (%s)", file, err, networkConfigKeys)}
	}
	if err := agent.PrintRenderFor(context.Background(), w, &nc, nmstate, node); err != nil {
		// Offline, an unresolved placeholder is the file's fault, not a
		// server that is not ready yet.
		return &errclass.ConfigError{Err: fmt.Errorf("%s: %w", file, err)}
	}
	return nil
}

// networkConfigKeys says what a render input holds, for an error about it:
// yaml.v3 names only the Go type (protocol.NetworkConfig) of a key it does
// not know.
const networkConfigKeys = "a NetworkConfig has the keys configurator (nmstate, nmconnections, nmc or none), " +
	"ipAddresses (a map of placeholder to IP pool) and config (the template)"
