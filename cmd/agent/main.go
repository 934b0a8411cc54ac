// Command agent is nodereg's on-node registration agent. Installed or linked
// as elemental-register it accepts that program's commands and flags
// unchanged (docs/protocol.md §8.1).
//
// The command line is spf13/cobra's, as elemental-register's is: help on
// stdout with Usage/Available Commands/Flags, a help and a completion
// command. Anything it does not understand ends the process with exit 64 and
// one line, before any run starts.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/logging"
	"github.com/nodereg/nodereg/internal/termsafe"
)

// version is set by the Makefile with -ldflags.
var version = "0.1.0-dev"

func main() {
	os.Exit(execute(filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr))
}

// cli is what every command shares: the program name, the streams and the
// persistent flags.
type cli struct {
	name string
	// stdout and stderr escape what would act on the terminal
	// (termsafe); logOut is stderr as given, for the logger, which
	// escapes messages itself and colours only a terminal.
	stdout, stderr, logOut io.Writer
	root                   string
	debug                  logging.Debug
	logFormat              *choice
	// lastRegister is the registration flags of the tree, for tests.
	lastRegister *registerFlags
}

// execute runs the command line and returns the exit status.
func execute(name string, args []string, stdout, stderr io.Writer) int {
	// Everything printed may hold a resource's or a server's strings (a
	// MachineRegistration's name, a rendered keyfile, an error quoting a
	// reply): one filter for every path that prints.
	out, errOut := &termsafe.Writer{W: stdout}, &termsafe.Writer{W: stderr}
	defer out.Flush()
	defer errOut.Flush()
	c := &cli{name: name, stdout: out, stderr: errOut, logOut: stderr}
	return cmdline.Execute(c.command(), args, errOut)
}

// logger builds the logger from --log-format and --debug.
func (c *cli) logger() (*logrus.Entry, error) {
	return logging.New(logging.Options{Format: c.logFormat.value, Debug: c.debug, Out: c.logOut})
}

// signalContext is cancelled by SIGINT or SIGTERM, with the signal as the
// cause, so the run ends with 130 or 143 and a line saying why.
func signalContext(log *logrus.Entry) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			log.Warnf("%s received: stopping", exitcode.StoppedBy(sig).(*exitcode.StoppedError).Signal)
			cancel(exitcode.StoppedBy(sig))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// outcome reports a failed run once and returns its exit status. logged:
// the error itself was already printed (a phase's failure line), so only
// the verdict is added.
func outcome(ctx context.Context, log *logrus.Entry, what string, err error, logged bool) int {
	if cause := context.Cause(ctx); cause != nil {
		var stopped *exitcode.StoppedError
		if errors.As(cause, &stopped) {
			err = cause
		}
	}
	if err == nil {
		return exitcode.OK
	}
	code := exitcode.Of(err)
	entry := log.WithField("exit", code)
	var pe *agent.PhaseError
	if errors.As(err, &pe) {
		entry = entry.WithField("phase", pe.Phase)
	}
	// The verdict leads with the cause's name (the error itself is on the
	// phase's line), so the last line of a failed run says why.
	verdict := what + ": " + exitcode.Meaning(code)
	if cause := exitcode.Cause(err); cause != "" {
		verdict = cause + ": " + verdict
	}
	var stopped *exitcode.StoppedError
	switch {
	case errors.As(err, &stopped):
		entry.Warnf("%s: %s", what, stopped)
	case logged:
		entry.Error(verdict)
	default:
		entry.WithError(err).Error(verdict)
	}
	return code
}
