package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/localconfig"
	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/host"
)

// inventoryCommand prints what the agent would send about this machine
// (upstream's dumpdata).
func (c *cli) inventoryCommand() *cobra.Command {
	var (
		configPath, labelsFile string
		labels                 labelList
		raw                    bool
	)
	format := newChoice("json", "json", "json-compact", "yaml", "labels")
	cmd := &cobra.Command{
		Use:     "inventory [hostinfo|legacy|smbios] [flags]",
		Aliases: []string{"dumpdata", "dump"},
		Short:   "Print the SMBIOS, system data, labels and annotations this machine would send",
		Long: `Prints what a registration would send about this machine: the SMBIOS map,
the system data, the labels and the annotations, with no secret in it. Talks
to no server. elemental-register's dumpdata kinds (hostinfo, legacy, smbios)
and -r/--raw are accepted; the document always holds all of them.`,
		ValidArgs: []string{"hostinfo", "legacy", "smbios"},
		Args:      cobra.MatchAll(cobra.MaximumNArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger()
			if err != nil {
				return exitcode.Usagef("%v", err)
			}
			var o localconfig.Overrides
			b, err := agent.DumpInventory(context.Background(), agent.Options{
				Root: c.root, ConfigPath: configPath, LabelsFile: labelsFile, Labels: labels,
				Overrides: o, Version: version, Log: log,
			})
			if err == nil {
				b, err = reformat(b, format.value)
			}
			if err != nil {
				return cmdline.Done(outcome(context.Background(), log, "inventory", err, false))
			}
			_, _ = c.stdout.Write(b)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.VarP(format, "format", "f", "output format: json, json-compact, yaml, or labels (only the labels, as YAML)")
	fs.BoolVarP(&raw, "raw", "r", false, "accepted for elemental-register compatibility; no effect")
	fs.StringVar(&configPath, "config-path", host.ConfigFile, "elemental config file, for its labels (under --root; missing is fine)")
	fs.StringVar(&labelsFile, "local-labels-file", host.LabelsFile, "flat YAML map of local labels (under --root)")
	fs.Var(&labels, "label", "label key=value (repeatable, or comma-separated)")
	return cmd
}

// reformat turns the indented JSON dump into the asked format.
func reformat(b []byte, format string) ([]byte, error) {
	switch format {
	case "json":
		return b, nil
	case "json-compact":
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		out, err := json.Marshal(v)
		return append(out, '\n'), err
	case "labels":
		var d struct {
			Labels map[string]string `json:"labels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, err
		}
		if len(d.Labels) == 0 {
			return []byte("{}\n"), nil
		}
		return yaml.Marshal(d.Labels)
	case "yaml":
		// JSON is YAML: read it as a tree (key order kept) and write it
		// back in block style.
		var n yaml.Node
		if err := yaml.Unmarshal(b, &n); err != nil {
			return nil, err
		}
		blockStyle(&n)
		return yaml.Marshal(&n)
	}
	return nil, fmt.Errorf("format %q", format)
}

// blockStyle drops JSON's flow style and quotes; yaml.v3 quotes again
// the strings that would otherwise read back as numbers or booleans.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle | yaml.DoubleQuotedStyle
	for _, c := range n.Content {
		blockStyle(c)
	}
}
