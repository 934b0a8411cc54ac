// Package cli is what nodereg's commands share on top of spf13/cobra: a
// command line that is not understood ends the process with exit 64 and one
// line naming the problem and where to look, and never starts a run.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// ExitUsage is EX_USAGE (sysexits.h): the command line is wrong.
const ExitUsage = 64

// Finished carries a command's exit status out of cobra: it is the outcome
// of a run, already reported, not a command-line error.
type Finished struct{ Code int }

func (f *Finished) Error() string { return fmt.Sprintf("exit %d", f.Code) }

// Done returns nil for exit status 0 and a *Finished otherwise, for a
// command's RunE.
func Done(code int) error {
	if code == 0 {
		return nil
	}
	return &Finished{code}
}

// Execute runs root with args and returns the exit status: a command's own
// status (Done), or ExitUsage with one line on stderr for anything cobra or
// a flag refused.
func Execute(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var f *Finished
	switch {
	case err == nil:
		return 0
	case errors.As(err, &f):
		return f.Code
	}
	fmt.Fprintf(stderr, "%s: %s (see '%s --help')\n", cmd.CommandPath(), OneLine(err), cmd.CommandPath())
	return ExitUsage
}

// OneLine is the first line of err's message: the problem, without the
// usage text some errors carry.
func OneLine(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// NoArgs refuses any positional argument, naming it: a stray word must
// never start a run.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return fmt.Errorf("unexpected argument %q", args[0])
}

// HelpCommand replaces cobra's help command, which answers an unknown topic
// with the root's help and exit 0; an unknown topic is a bad command line.
func HelpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}
