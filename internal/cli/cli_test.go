package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// tree is a root that finishes with the status given by --code, and one
// subcommand without flags.
func tree(out *strings.Builder) *cobra.Command {
	var code int
	root := &cobra.Command{Use: "prog", Args: NoArgs, SilenceErrors: true, SilenceUsage: true,
		RunE: func(*cobra.Command, []string) error { return Done(code) }}
	root.Flags().IntVar(&code, "code", 0, "exit status")
	root.SetOut(out)
	root.SetHelpCommand(HelpCommand())
	root.AddCommand(&cobra.Command{Use: "sub", Args: NoArgs, Run: func(*cobra.Command, []string) {}})
	return root
}

func TestExecute(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{[]string{"--code", "78"}, 78, ""},
		{[]string{"sub"}, 0, ""},
		{[]string{"help", "sub"}, 0, ""},
		{[]string{"--code", "x"}, ExitUsage, `prog: invalid argument "x" for "--code" flag: strconv.ParseInt: parsing "x": invalid syntax (see 'prog --help')` + "\n"},
		{[]string{"nope"}, ExitUsage, `prog: unknown command "nope" for "prog" (see 'prog --help')` + "\n"},
		{[]string{"sub", "extra"}, ExitUsage, `prog sub: unexpected argument "extra" (see 'prog sub --help')` + "\n"},
		{[]string{"sub", "--code", "1"}, ExitUsage, "prog sub: unknown flag: --code (see 'prog sub --help')\n"},
		{[]string{"sbu"}, ExitUsage, `prog: unknown command "sbu" for "prog"; did you mean sub? (see 'prog --help')` + "\n"},
		{[]string{"sbu", "-f", "x"}, ExitUsage, `prog: unknown command "sbu" for "prog"; did you mean sub? (see 'prog --help')` + "\n"},
		{[]string{"--code", "1", "sbu", "--nope"}, ExitUsage, `prog: unknown command "sbu" for "prog"; did you mean sub? (see 'prog --help')` + "\n"},
		{[]string{"--code", "sbu"}, ExitUsage, `prog: invalid argument "sbu" for "--code" flag: strconv.ParseInt: parsing "sbu": invalid syntax (see 'prog --help')` + "\n"},
		{[]string{"sub", "-f"}, ExitUsage, "prog sub: unknown shorthand flag: 'f' in -f (see 'prog sub --help')\n"},
		{[]string{"--cdoe", "1"}, ExitUsage, "prog: unknown flag: --cdoe; did you mean --code? (see 'prog --help')\n"},
		{[]string{"--cod=1"}, ExitUsage, "prog: unknown flag: --cod; did you mean --code? (see 'prog --help')\n"},
		{[]string{"--zzzzzz"}, ExitUsage, "prog: unknown flag: --zzzzzz (see 'prog --help')\n"},
		{[]string{"completion", "foo"}, ExitUsage, `prog completion: unknown command "foo" for "prog completion" (see 'prog completion --help')` + "\n"},
		{[]string{"completion", "bassh"}, ExitUsage, `prog completion: unknown command "bassh" for "prog completion"; did you mean bash? (see 'prog completion --help')` + "\n"},
		{[]string{"completion", "bash"}, 0, ""},
		{[]string{"completion"}, 0, ""},
		{[]string{"help", "nope"}, ExitUsage, `prog help: unknown help topic "nope" (see 'prog help --help')` + "\n"},
	} {
		var out, errb strings.Builder
		if code := Execute(tree(&out), c.args, &errb); code != c.code || errb.String() != c.stderr {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", c.args, code, errb.String(), c.code, c.stderr)
		}
	}
}

func TestOneLine(t *testing.T) {
	if got := OneLine(errString("  first\nsecond\n")); got != "first" {
		t.Errorf("OneLine = %q", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
