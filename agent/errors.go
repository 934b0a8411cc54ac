package agent

import (
	"errors"
	"fmt"
)

// Exit codes (sysexits.h), so the unit can tell retryable failures from
// configuration errors (RestartPreventExitStatus=78).
const (
	ExitOK        = 0
	ExitTempFail  = 75 // EX_TEMPFAIL: try again later
	ExitConfig    = 78 // EX_CONFIG: a person must change something
	ExitUsageFlag = 64 // EX_USAGE: bad command line
)

// PhaseError is a failure in one phase of the run.
type PhaseError struct {
	Phase Phase
	Err   error
}

func (e *PhaseError) Error() string { return string(e.Phase) + ": " + e.Err.Error() }
func (e *PhaseError) Unwrap() error { return e.Err }

// ConfigError is a failure only a change of configuration (local or on the
// server) can fix: retrying would give the same answer.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErr(format string, a ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, a...)}
}

// ExitCode maps the result of a run to the process exit status.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ExitConfig
	}
	return ExitTempFail
}
