// Package exitcode maps a failure to a process exit status (sysexits.h),
// so systemd can act on it: RestartPreventExitStatus lists what a restart
// cannot fix, Restart=on-failure retries the rest. The in-process retry
// loop (agent/retry) is handed Retryable, so it asks the same mapping
// whether another attempt can help.
//
// The error decides what it is: the package that makes it declares its
// class (internal/errclass), by type or sentinel, never by message text, so
// a reworded message cannot change an exit status. This package knows only
// the classes and its own command-line and signal errors.
package exitcode

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/nodereg/nodereg/internal/errclass"
)

// The exit statuses. 130 and 143 are the shell's 128+signal.
const (
	OK          = 0
	Usage       = 64 // EX_USAGE: the command line is wrong
	TempFail    = 75 // EX_TEMPFAIL: try again later
	Config      = 78 // EX_CONFIG: a person must change something
	Interrupted = 128 + int(syscall.SIGINT)
	Terminated  = 128 + int(syscall.SIGTERM)
)

// NoRestart are the statuses a restart cannot fix: the units list them in
// RestartPreventExitStatus= (systemd/units_test.go checks it).
var NoRestart = []int{Usage, Config}

// Stopped are the statuses of a run ended on request: the units list them
// in SuccessExitStatus= so a `systemctl stop` leaves no failed unit.
var Stopped = []int{Interrupted, Terminated}

// Meaning is the exit-code table's wording of each status (docs/cli.md),
// for the final log line.
func Meaning(code int) string {
	switch code {
	case OK:
		return "done"
	case Usage:
		return "bad command line"
	case TempFail:
		return "try again later"
	case Config:
		return "needs a person"
	case Interrupted:
		return "stopped by SIGINT"
	case Terminated:
		return "stopped by SIGTERM"
	}
	return "unknown"
}

// UsageError is a bad command line: unknown subcommand, flag or argument,
// or a flag value that cannot mean anything.
type UsageError struct{ Err error }

func (e *UsageError) Error() string         { return e.Err.Error() }
func (e *UsageError) Unwrap() error         { return e.Err }
func (e *UsageError) Class() errclass.Class { return errclass.Usage }
func (e *UsageError) Cause() string         { return "command line" }

// Usagef returns a UsageError.
func Usagef(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// StoppedError says the run was ended by a signal, not by a failure.
type StoppedError struct{ Signal syscall.Signal }

func (e *StoppedError) Error() string { return "stopped by " + signalName(e.Signal) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// StoppedBy returns the StoppedError for an os.Signal (SIGINT, SIGTERM).
func StoppedBy(sig os.Signal) error {
	s, _ := sig.(syscall.Signal)
	return &StoppedError{Signal: s}
}

// Of maps the outcome of a run to the exit status: a stop by signal is
// 130 or 143, then the class of the first classed error in the chain
// (errclass.Of); an error that declares none is "try again later".
func Of(err error) int {
	if err == nil {
		return OK
	}
	if s, ok := stopped(err); ok {
		if s.Signal == syscall.SIGINT {
			return Interrupted
		}
		if s.Signal == syscall.SIGTERM {
			return Terminated
		}
	}
	c, _ := errclass.Of(err)
	switch c {
	case errclass.Usage:
		return Usage
	case errclass.Config:
		return Config
	}
	return TempFail
}

// Retryable reports whether another attempt in the same process may
// succeed: only what is "try again later" and whose class is not Final (an
// exhausted pool, a registration host DNS says does not exist: exit 75 at
// once, so systemd's restart, not the whole --deadline, tries again). It
// is the agent's one retry decision (the retry.Classifier every retry loop
// of the agent is handed).
func Retryable(err error) bool {
	return Of(err) == TempFail && !errclass.Is(err, errclass.Final)
}

// Cause names what err is for the outcome line to lead with ("server
// refused the upgrade", "certificate verification", ...): the signal of a
// stop, or the cause its classed error names; "" when none does.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := stopped(err); ok && (s.Signal == syscall.SIGINT || s.Signal == syscall.SIGTERM) {
		return "stopped by " + signalName(s.Signal)
	}
	return errclass.CauseOf(err)
}

func stopped(err error) (*StoppedError, bool) {
	var s *StoppedError
	ok := errors.As(err, &s)
	return s, ok
}
