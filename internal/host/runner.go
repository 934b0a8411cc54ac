package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Command is one external program run. Stdin is the whole input; a nil
// Stdin means /dev/null, never the agent's own stdin.
type Command struct {
	Name  string
	Args  []string
	Env   []string // added to the agent's environment
	Stdin []byte
	// ReadOnly: the command changes nothing on the host (nmstatectl gc,
	// nmcli connection show), so a dry run runs it too.
	ReadOnly bool
	// Stderr, when set, also gets what the command writes to stderr,
	// whether it succeeds or not (a *CommandError carries it only on
	// failure): nmstatectl logs there on every call.
	Stderr io.Writer
}

// String quotes the command the way a shell would need it.
func (c Command) String() string {
	parts := make([]string, 0, 1+len(c.Args))
	for _, e := range c.Env {
		parts = append(parts, shellQuote(e))
	}
	parts = append(parts, shellQuote(c.Name))
	for _, a := range c.Args {
		parts = append(parts, shellQuote(a))
	}
	s := strings.Join(parts, " ")
	if c.Stdin != nil {
		s += " <<input (" + strconv.Itoa(len(c.Stdin)) + " bytes)"
	}
	return s
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '-' || r == '_' || r == '.' || r == '=' || r == ':' || r == ',' ||
			r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Runner runs external programs; it is the process boundary tests and
// dry-run swap.
type Runner interface {
	Run(ctx context.Context, cmd Command) (stdout []byte, err error)
}

// RunFunc is a Runner as a function value.
type RunFunc func(ctx context.Context, cmd Command) ([]byte, error)

// Run implements Runner.
func (f RunFunc) Run(ctx context.Context, cmd Command) ([]byte, error) { return f(ctx, cmd) }

// PrintRunner is a dry run's Runner: read-only commands run through Real,
// every other one is printed ("# would run ...") and not run.
type PrintRunner struct {
	W    io.Writer
	Real Runner // nil: ExecRunner
}

// Run implements Runner.
func (p PrintRunner) Run(ctx context.Context, c Command) ([]byte, error) {
	if c.ReadOnly {
		if p.Real == nil {
			return ExecRunner{}.Run(ctx, c)
		}
		return p.Real.Run(ctx, c)
	}
	fmt.Fprintf(p.W, "# would run %s\n", c)
	return nil, nil
}

// CommandError is a failed run: the command, its exit code (-1 when it did
// not exit on its own), stdout and stderr.
type CommandError struct {
	Command  string
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	Err      error
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("running %s: %v", e.Command, e.Err)
	if s := strings.TrimSpace(string(e.Stderr)); s != "" {
		msg += "; stderr: " + s
	}
	if s := strings.TrimSpace(string(e.Stdout)); s != "" {
		msg += "; stdout: " + truncate(s, 2048)
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ExecRunner runs programs with os/exec. Cancelling ctx kills the program;
// WaitDelay (default 5 s) bounds the wait for its pipes afterwards.
type ExecRunner struct {
	WaitDelay time.Duration
}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, c Command) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	cmd.WaitDelay = r.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, c.Stderr)
	}
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return stdout.Bytes(), &CommandError{Command: c.String(), ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Err: err}
}

// NotLive is the runner of a run that must not touch the host's live state
// (a scratch --root without --apply-live): read-only commands (nmstatectl
// gc) run through Real, any other is logged through Say and not run.
type NotLive struct {
	Real Runner
	Say  func(Command)
}

// Run implements Runner.
func (n NotLive) Run(ctx context.Context, c Command) ([]byte, error) {
	if c.ReadOnly {
		return n.Real.Run(ctx, c)
	}
	n.Say(c)
	return nil, nil
}
