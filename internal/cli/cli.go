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
	"github.com/spf13/pflag"

	"github.com/nodereg/nodereg/internal/editdist"
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
	refuseUnknownSubcommands(root)
	cmd, err := root.ExecuteC()
	var f *Finished
	switch {
	case err == nil:
		return 0
	case errors.As(err, &f):
		return f.Code
	}
	err = unknownCommand(root, cmd, args, err)
	fmt.Fprintf(stderr, "%s: %s%s (see '%s --help')\n", cmd.CommandPath(), OneLine(err), flagSuggestion(cmd, err), cmd.CommandPath())
	return ExitUsage
}

// refuseUnknownSubcommands gives every command that only groups others
// (cobra's completion) a RunE: cobra answers a word such a command does not
// know (`completion foo`) with its help and exit 0, where it is a bad
// command line.
func refuseUnknownSubcommands(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() && !sub.Runnable() {
				sub.Args = NoArgs
				sub.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			}
			walk(sub)
		}
	}
	walk(root)
}

// unknownCommand: a mistyped command followed by flags (`agent rendr -f
// x`) is parsed by cobra as the parent's own flags and fails on the first
// one the parent lacks. The word is the mistake, not the flag: when the
// command that failed has subcommands and the first word of its command
// line is none of them, the error is NoArgs' unknown command, with its
// "did you mean".
func unknownCommand(root, cmd *cobra.Command, args []string, err error) error {
	if cmd == nil || !cmd.HasSubCommands() || strings.HasPrefix(err.Error(), "unknown command") {
		return err
	}
	_, rest, ferr := root.Find(args)
	if ferr != nil {
		return err
	}
	word := firstWord(cmd, rest)
	if word == "" {
		return err
	}
	for _, sub := range cmd.Commands() {
		if sub.Name() == word || sub.HasAlias(word) {
			return err
		}
	}
	return NoArgs(cmd, []string{word})
}

// firstWord is the first argument of args that is neither a flag nor the
// value of one, as cmd's flags read them; "" when there is none.
func firstWord(cmd *cobra.Command, args []string) string {
	lookup := func(long string, short string) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{cmd.LocalFlags(), cmd.InheritedFlags()} {
			if long != "" {
				if f := fs.Lookup(long); f != nil {
					return f
				}
			} else if f := fs.ShorthandLookup(short); f != nil {
				return f
			}
		}
		return nil
	}
	// An unknown flag before any word may or may not take the next
	// argument: then there is no telling, and cobra's error stands.
	for i := 0; i < len(args); i++ {
		a := args[i]
		var f *pflag.Flag
		switch {
		case a == "--":
			return ""
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f = lookup(name, ""); f == nil {
				return ""
			}
			if hasValue {
				continue
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if f = lookup("", a[len(a)-1:]); f == nil {
				return ""
			}
			if len(a) > 2 && !strings.Contains(a, "=") {
				continue // -abc: a value, if any, is in the word
			}
		default:
			return a
		}
		if f.NoOptDefVal == "" && !strings.Contains(a, "=") {
			i++
		}
	}
	return ""
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
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only on its path
		}
		return fmt.Errorf("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(cmd.SuggestionsFor(args[0])))
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

// didYouMean is the suggestion part of a message, "" without one.
func didYouMean(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(names, " or ") + "?"
}

// flagSuggestion names the flags of cmd close to the one pflag did not
// know ("unknown flag: --registration-ulr"); cobra suggests commands only.
func flagSuggestion(cmd *cobra.Command, err error) string {
	const prefix = "unknown flag: --"
	msg := OneLine(err)
	i := strings.Index(msg, prefix)
	if i < 0 {
		return ""
	}
	typed, _, _ := strings.Cut(msg[i+len(prefix):], "=")
	var names []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		if d := editdist.Levenshtein(strings.ToLower(typed), strings.ToLower(f.Name)); d <= 2 || (len(typed) >= 3 && strings.HasPrefix(f.Name, typed)) {
			names = append(names, "--"+f.Name)
		}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return didYouMean(names)
}
