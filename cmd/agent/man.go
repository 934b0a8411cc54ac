//go:build genman

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// The man pages are generated from the command tree itself (make man), so
// they say what --help says. Only a binary built with the tag genman has
// the command: the shipped agent links no man page generator.

func (c *cli) extraCommands() []*cobra.Command {
	return []*cobra.Command{{
		Use:    "gen-man-pages DIR",
		Short:  "write the man pages of every command into DIR (section 8)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			h := &doc.GenManHeader{Title: "NODEREG-AGENT", Section: "8", Source: "nodereg " + version, Manual: "System Administration"}
			if err := doc.GenManTree(root, h, args[0]); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}}
}
