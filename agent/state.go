package agent

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/statelock"
)

// loadState reads the state file (state.Load); a path that holds no file
// needs a person (exit 78), not a retry.
func loadState(files host.FS, path string) (*state.State, string, error) {
	st, note, err := state.Load(files, path)
	var notFile *state.NotAFileError
	if errors.As(err, &notFile) {
		return nil, "", &errclass.ConfigError{Err: err}
	}
	return st, note, err
}

// lock takes the state lock for a run that may write (not a dry run): the
// boot service, the update timer and an admin's --reset-network would
// otherwise interleave writes to the state, the manifest and the keyfiles.
func (e *env) lock(ctx context.Context) (unlock func(), err error) {
	if e.o.DryRun {
		return func() {}, nil
	}
	dir := path.Dir(e.o.StatePath)
	if err := e.root.MkdirAll(dir, 0o700); err != nil {
		return nil, &PhaseError{Phase: PhaseState, Err: fmt.Errorf("creating state directory: %w", err)}
	}
	wait := e.o.LockWait
	if wait <= 0 {
		wait = DefaultLockWait
	}
	if e.o.Deadline > 0 && e.o.Deadline < wait {
		wait = e.o.Deadline // --deadline bounds the whole run's wait
	}
	release, err := e.root.Lock(ctx, path.Join(dir, statelock.Name), wait)
	if err != nil {
		var stopped *exitcode.StoppedError
		if errors.As(context.Cause(ctx), &stopped) {
			return nil, &PhaseError{Phase: PhaseState, Err: stopped}
		}
		// Logged as a phase's failure is: the final line leaves out the
		// error of a PhaseError, and this one names the holder's pid.
		e.phase(PhaseState, redactor{}).log.WithError(err).Error("[failed]")
		return nil, &PhaseError{Phase: PhaseState, Err: err}
	}
	e.removeStaleTemps()
	return func() { _ = release() }, nil
}

// removeStaleTemps removes the temp files of writes a kill -9 cut short, in
// the directories the agent writes; the state lock is held, so none is in
// flight (docs/reliability.md, "Hostile server").
func (e *env) removeStaleTemps() {
	log := e.phase(PhaseState, redactor{}).log
	for _, dir := range []string{path.Dir(e.o.StatePath), host.KeyfileDir, host.StateDir, catrust.Dir, path.Dir(host.Applicator), host.RuntimeKeyfileDir} {
		removed, err := e.root.RemoveStale(dir)
		if err != nil {
			log.WithError(err).Warn("removing stale temp files")
		}
		for _, f := range removed {
			log.WithField("file", f).Info("removed a temp file an interrupted run left")
		}
	}
}
