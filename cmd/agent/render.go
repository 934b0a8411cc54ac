package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
)

// maxRenderInput bounds the file render reads; a network config is a few
// kilobytes.
const maxRenderInput = 1 << 20

func (c *cli) renderCommand() *cobra.Command {
	var file string
	nmstate := newNmstateChoice()
	cmd := &cobra.Command{
		Use:   "render --network-config FILE",
		Short: "Render a NetworkConfig file offline: what --dry-run prints, with no server",
		Long: `Renders a NetworkConfig YAML file (configurator, ipAddresses, config) and
prints what a dry run prints: the digested config, the keyfiles, the yip
applicator and the commands. Talks to no server; writes nothing. A key the
NetworkConfig does not have is an error. An nmstate config's keyfiles come
from nmstatectl gc when it is installed, else from the built-in translator
(--nmstate chooses); the output says which.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := render(c.stdout, file, apply.NmstateChoice(nmstate.value)); err != nil {
				fmt.Fprintf(c.stderr, "render: %v\n", err)
				return done(exitcode.Of(err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "network-config", "", "NetworkConfig YAML file (required)")
	_ = cmd.MarkFlagRequired("network-config")
	cmd.Flags().Var(nmstate, "nmstate", nmstateUsage)
	return cmd
}

func render(w io.Writer, file string, nmstate apply.NmstateChoice) error {
	b, err := readFile(file, maxRenderInput)
	if err != nil {
		return &exitcode.ConfigError{Err: err}
	}
	var nc protocol.NetworkConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&nc); err != nil && !errors.Is(err, io.EOF) {
		return &exitcode.ConfigError{Err: fmt.Errorf("%s: %w", file, err)}
	}
	if err := agent.PrintRender(context.Background(), w, &nc, nmstate); err != nil {
		// Offline, an unresolved placeholder is the file's fault, not a
		// server that is not ready yet.
		return &exitcode.ConfigError{Err: fmt.Errorf("%s: %w", file, err)}
	}
	return nil
}

func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
