package agent

import (
	"github.com/nodereg/nodereg/agent/exitcode"
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
type ConfigError = exitcode.ConfigError

func configErr(format string, a ...any) error {
	return exitcode.Configf(format, a...)
}

// ExitCode maps the result of a run to the process exit status
// (exitcode.Of, the one table).
func ExitCode(err error) int { return exitcode.Of(err) }
