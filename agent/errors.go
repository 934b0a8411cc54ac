package agent

// PhaseError is a failure in one phase of the run.
type PhaseError struct {
	Phase Phase
	Err   error
}

func (e *PhaseError) Error() string { return string(e.Phase) + ": " + e.Err.Error() }
func (e *PhaseError) Unwrap() error { return e.Err }
