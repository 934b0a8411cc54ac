package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/machinereg"
)

// maxRenderInput bounds the file render reads; a network config is a few
// kilobytes.
const maxRenderInput = 1 << 20

const renderLong = `Renders a network config and prints what a dry run prints: the digested
config, the keyfiles, the yip applicator and the commands. Talks to no
server; writes nothing. The input is a NetworkConfig as a node gets it
(configurator, ipAddresses: placeholder to address, config), or
elemental-operator's MachineRegistration, whole or its spec.config.network,
whose ipAddresses name an IPAM pool per placeholder: --set NAME=ADDRESS (or
ADDRESS/PREFIX; the prefix is dropped, as the operator sends the address
only) gives a placeholder the address its pool would, and a placeholder no
--set names gets a sample address from 192.0.2.0/24 (TEST-NET-1, from .10
up in name order); the output says which. A key the input does not have
is an error. An nmstate config's keyfiles come
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
comes from, and the runtime keyfiles. Nothing is probed or written.`

func (c *cli) renderCommand() *cobra.Command {
	var file, configPath string
	var boot bool
	var set []string
	nmstate := newNmstateChoice()
	cmd := &cobra.Command{
		Use:   "render --input FILE [--set NAME=ADDRESS]... | --bootstrap",
		Short: "Render a NetworkConfig or a MachineRegistration offline: what --dry-run prints, with no server",
		Long:  renderLong,
		Args:  cmdline.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			switch {
			case boot && file != "":
				facts, ferr := parseFacts(set, cmd.Flags().Changed("root"))
				if ferr != nil {
					return ferr
				}
				err = renderBootstrap(c.stdout, file, facts, c.root, apply.NmstateChoice(nmstate.value))
			case boot && len(set) > 0:
				return errors.New("--set with --bootstrap gives the machine's facts for the file of -f: --bootstrap -f FILE --set mac=ADDRESS")
			case boot:
				var flag *string // nil: the config file's elemental.registration.nmstate, else auto
				if cmd.Flags().Changed("nmstate") {
					flag = &nmstate.value
				}
				err = agent.PrintBootstrap(context.Background(), c.stdout, c.root, configPath, flag)
				if errors.Is(err, fs.ErrNotExist) {
					err = fmt.Errorf("%w (render --bootstrap reads the node's config; off the node, render --bootstrap -f FILE --set mac=ADDRESS reads a cloud-config, a SeedImage or a drop-in)", err)
				}
			case file == "":
				return errors.New(`required flag(s) "input" not set (or --bootstrap)`)
			default:
				addrs, perr := parseSet(set)
				if perr != nil {
					return perr
				}
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
				err = render(c.stdout, file, node, addrs, apply.NmstateChoice(nmstate.value))
			}
			if err != nil {
				fmt.Fprintf(c.stderr, "render: %v\n", err)
				return cmdline.Done(exitcode.Of(err))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "input", "f", "", "NetworkConfig, MachineRegistration or its spec.config.network, YAML (required unless --bootstrap)")
	cmd.Flags().StringArrayVar(&set, "set", nil, "NAME=ADDRESS[/PREFIX]: the address of placeholder {NAME} (repeatable)")
	// The old spelling, kept working but not shown: on register
	// --network-config is a mode (auto, embedded, explicit), not a file.
	cmd.Flags().StringVar(&file, "network-config", "", "old spelling of --input")
	_ = cmd.Flags().MarkHidden("network-config")
	cmd.Flags().BoolVar(&boot, "bootstrap", false, "print the bootstrap network of the config file (--config-path) for this machine")
	cmd.Flags().StringVar(&configPath, "config-path", host.ConfigFile, "elemental config file (under --root): its network policy judges the config; with --bootstrap, its bootstrap network is printed")
	cmd.Flags().Var(nmstate, "nmstate", nmstateUsage)
	return cmd
}

// factKeys are what --set gives with --bootstrap -f: the facts a static
// entry matches and a range's start is derived from (bootstrap.Facts).
var factKeys = []string{"mac", "serial", "uuid"}

// parseFacts reads --set with --bootstrap: mac=ADDRESS (repeatable),
// serial=S, uuid=U. Without any, and without --root to read them from,
// there is no machine to preview: a usage error.
func parseFacts(set []string, root bool) (*bootstrap.Facts, error) {
	if len(set) == 0 {
		if root {
			return nil, nil
		}
		return nil, errors.New("--bootstrap -f FILE needs the machine's facts: --set mac=ADDRESS, --set serial=S or --set uuid=U (or --root DIR to read them from a machine's tree)")
	}
	var macs []string
	one := map[string]string{}
	for _, s := range set {
		k, v, ok := strings.Cut(s, "=")
		switch {
		case !ok || v == "" || !slices.Contains(factKeys, k):
			return nil, fmt.Errorf("--set %q: with --bootstrap, --set gives a fact of the machine: mac=ADDRESS, serial=S or uuid=U", s)
		case k == "mac":
			macs = append(macs, v)
		case one[k] != "":
			return nil, fmt.Errorf("--set %s given twice", k)
		default:
			one[k] = v
		}
	}
	f, err := bootstrap.FactsOf(macs, one["serial"], one["uuid"])
	if err != nil {
		return nil, exitcode.Usagef("--set %v", err)
	}
	return &f, nil
}

// renderBootstrap is render --bootstrap -f: the bootstrap network the file
// carries (a config file or drop-in, a cloud-config, a SeedImage or a
// MachineRegistration), for the machine facts describes, or, nil, the one
// under root.
func renderBootstrap(w io.Writer, file string, facts *bootstrap.Facts, root string, nmstate apply.NmstateChoice) error {
	b, err := host.ReadInput(file, maxRenderInput)
	if err != nil {
		return &errclass.ConfigError{Err: err}
	}
	conf, where, err := bootstrap.FromDocument(b)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(w, "# %s: %s\n", file, where)
	return agent.PrintBootstrapFor(context.Background(), w, conf, facts, root, nmstate)
}

func render(w io.Writer, file string, node agent.RenderFor, set map[string]string, nmstate apply.NmstateChoice) error {
	b, err := host.ReadInput(file, maxRenderInput)
	if err != nil {
		return &errclass.ConfigError{Err: err}
	}
	in, err := machinereg.Parse(b)
	if err != nil {
		return &errclass.ConfigError{Err: fmt.Errorf("%s: %w", file, err)}
	}
	nc, assigned, err := in.Resolve(set)
	if err != nil {
		return &errclass.ConfigError{Err: fmt.Errorf("%s: %w", file, err)}
	}
	if in.Pools != nil {
		fmt.Fprintf(w, "# %s: %s\n", file, in.What)
		for _, a := range assigned {
			how := "--set"
			if a.Sample {
				how = "sample address (no --set " + a.Name + "=ADDRESS)"
			}
			fmt.Fprintf(w, "# {%s} from pool %s: %s, %s\n", a.Name, a.Pool, a.Address, how)
		}
	}
	if err := agent.PrintRenderFor(context.Background(), w, nc, nmstate, node); err != nil {
		// Offline, an unresolved placeholder is the file's fault, not a
		// server that is not ready yet.
		return &errclass.ConfigError{Err: fmt.Errorf("%s: %w", file, err)}
	}
	return nil
}

// parseSet reads the --set values: NAME=ADDRESS[/PREFIX], one per name.
func parseSet(set []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range set {
		name, addr, ok := strings.Cut(s, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("--set %q: want NAME=ADDRESS or NAME=ADDRESS/PREFIX", s)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--set %s given twice", name)
		}
		out[name] = addr
	}
	return out, nil
}
