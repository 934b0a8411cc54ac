//go:build !genman

package main

import "github.com/spf13/cobra"

// extraCommands are none in the shipped agent (man.go: the man page
// generator, build tag genman).
func (*cli) extraCommands() []*cobra.Command { return nil }
