package agent

import (
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/errclass"
)

// Exit codes: the table lives in agent/exitcode; these names stay for the
// callers that spell them this way.
const (
	ExitOK        = exitcode.OK
	ExitTempFail  = exitcode.TempFail
	ExitConfig    = exitcode.Config
	ExitUsageFlag = exitcode.Usage
)

// PhaseError is a failure in one phase of the run.
type PhaseError struct {
	Phase Phase
	Err   error
}

func (e *PhaseError) Error() string { return string(e.Phase) + ": " + e.Err.Error() }
func (e *PhaseError) Unwrap() error { return e.Err }

// ConfigError is a failure only a change of configuration (local or on the
// server) can fix (exit 78).
type ConfigError = errclass.ConfigError

func configErr(format string, a ...any) error {
	return errclass.Configf(format, a...)
}

// ExitCode maps the result of a run to the process exit status
// (exitcode.Of, by the error's class).
func ExitCode(err error) int { return exitcode.Of(err) }
