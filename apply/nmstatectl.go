package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
)

// NmstatectlError is a failed nmstatectl run, told by the line in which
// nmstatectl says what went wrong (`NmstateError: <kind>: <reason>`, or
// the argument parser's `error: …`), not by its whole stderr: every call
// starts that stream with its version banner and INFO lines
// (`[<time> INFO  nmstatectl] Nmstate version: …`), which say nothing
// about the failure and, being the first line, were all a one-line report
// kept of it.
type NmstatectlError struct {
	// Message is nmstatectl's error line; "" when its stderr held none.
	Message string
	Err     *host.CommandError
}

func (e *NmstatectlError) Error() string {
	msg := fmt.Sprintf("running %s: %v", e.Err.Command, e.Err.Err)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

func (e *NmstatectlError) Unwrap() error { return e.Err }

// nmstatectlLogLine is one line of nmstatectl's log on stderr:
// `[<time> <LEVEL> <target>] <message>` (env_logger's format; the time
// has no blank). Compiled by the first caller, not at every start.
var nmstatectlLogLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\[\S+ +(TRACE|DEBUG|INFO|WARN|ERROR) +\S+\] `)
})

// splitNmstatectlStderr parts nmstatectl's stderr into its log lines and
// the rest, which is its error when it failed.
func splitNmstatectlStderr(stderr []byte) (logLines, rest []string) {
	for _, line := range strings.Split(strings.TrimRight(string(stderr), "\n"), "\n") {
		switch {
		case nmstatectlLogLine().MatchString(line):
			logLines = append(logLines, line)
		case strings.TrimSpace(line) != "":
			rest = append(rest, strings.TrimSpace(line))
		}
	}
	return logLines, rest
}

// nmstatectlMessage is the line of stderr that says why nmstatectl failed:
// the last `NmstateError:` line, else the argument parser's first
// `error:` line (its usage text follows it), else the other lines
// that are not its log, joined.
func nmstatectlMessage(stderr []byte) string {
	_, rest := splitNmstatectlStderr(stderr)
	for i := len(rest) - 1; i >= 0; i-- {
		if strings.HasPrefix(rest[i], "NmstateError: ") {
			return rest[i]
		}
	}
	for _, l := range rest {
		if strings.HasPrefix(l, "error: ") {
			return l
		}
	}
	return strings.Join(rest, " ")
}

// runNmstatectl runs an nmstatectl command through run: its log lines go
// to log at debug, whatever the outcome, and a failure is an
// *NmstatectlError quoting nmstatectl's error line.
func runNmstatectl(ctx context.Context, run host.RunFunc, log *logrus.Entry, c host.Command) ([]byte, error) {
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := run(ctx, c)
	b := stderr.Bytes()
	var ce *host.CommandError
	if len(b) == 0 && errors.As(err, &ce) {
		b = ce.Stderr // a Runner that does not honour Command.Stderr
	}
	logLines, _ := splitNmstatectlStderr(b)
	log = logx.OrDiscard(log)
	for _, l := range logLines {
		log.WithField("command", "nmstatectl "+firstArg(c.Args)).Debug(l)
	}
	if errors.As(err, &ce) {
		return out, &NmstatectlError{Message: nmstatectlMessage(ce.Stderr), Err: ce}
	}
	return out, err
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// runNmstatectl is runNmstatectl through the applier's Runner and log.
func (a *Applier) runNmstatectl(ctx context.Context, c host.Command) ([]byte, error) {
	return runNmstatectl(ctx, a.run, a.log(), c)
}
