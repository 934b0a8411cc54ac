package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/atomicfile"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/safefile"
	"github.com/nodereg/nodereg/internal/statelock"
)

// State is the state file: elemental-register's keys (docs/protocol.md §8.3), so
// an existing node keeps its registration when the binary is swapped, plus
// nodereg's own, which upstream readers ignore.
type State struct {
	InitialRegistration time.Time `yaml:"initialRegistration,omitempty"`
	EmulatedTPM         bool      `yaml:"emulatedTPM,omitempty"`
	EmulatedTPMSeed     int64     `yaml:"emulatedTPMSeed,omitempty"`

	// AK is the cached attestation key blob (base64), reused across boots
	// so no key is created twice.
	AK string `yaml:"nodereg-ak,omitempty"`
	// NetworkDigest identifies the network config last persisted and
	// applied: an unchanged config is not applied again.
	NetworkDigest string `yaml:"nodereg-network-digest,omitempty"`
	// NetworkState and NetworkAddresses are reported back to the server
	// as annotations at the next registration: what this node did with
	// its network config.
	NetworkState     string `yaml:"nodereg-network-state,omitempty"`
	NetworkAddresses string `yaml:"nodereg-network-addresses,omitempty"`
	// NetworkError* keep a failed plan or apply (docs/annotations.md)
	// until a later apply succeeds: reported back at every registration
	// meanwhile. NetworkErrorInterfaces are the failed config's, by comma.
	NetworkError           string `yaml:"nodereg-network-error,omitempty"`
	NetworkErrorKind       string `yaml:"nodereg-network-error-kind,omitempty"`
	NetworkErrorPhase      Phase  `yaml:"nodereg-network-error-phase,omitempty"`
	NetworkErrorInterfaces string `yaml:"nodereg-network-error-interfaces,omitempty"`
	// NetworkDrift is what the last drift repair put back (the update
	// run, docs/annotations.md); cleared by the next apply of a new config.
	NetworkDrift string `yaml:"nodereg-network-drift-repaired,omitempty"`
	// LastPhase is where the previous run saved this file: PhaseFinish,
	// or PhaseHandOver when it handed over to the toolkit (install,
	// reset), which the first run after it logs.
	LastPhase Phase `yaml:"nodereg-last-phase,omitempty"`

	// loaded is the file as read: an unchanged state is not written
	// again (two fsyncs saved on every warm boot).
	loaded []byte
}

// Registered reports whether a registration succeeded before.
func (s *State) Registered() bool { return !s.InitialRegistration.IsZero() }

// AKBlob decodes the cached AK; a broken value is dropped (a new AK is made).
func (s *State) AKBlob() []byte {
	b, err := base64.StdEncoding.DecodeString(s.AK)
	if err != nil {
		return nil
	}
	return b
}

// SetAKBlob stores the AK blob.
func (s *State) SetAKBlob(b []byte) {
	if len(b) == 0 {
		s.AK = ""
		return
	}
	s.AK = base64.StdEncoding.EncodeToString(b)
}

// maxStateFile bounds the state file: a few keys and a TPM key blob.
const maxStateFile = 1 << 20

// NoteFirstRegistration is LoadState's note when there is no state file.
const NoteFirstRegistration = "no state file: first registration"

// LoadState reads the state file. Missing means first registration. A
// corrupt file is kept aside through files (as <path>.corrupt-<unix time>
// on the host; a dry run's printing edge only says so), and the run starts
// fresh; note says what happened.
func LoadState(files host.FS, path string) (st *State, note string, err error) {
	b, err := files.ReadFile(path, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{}, NoteFirstRegistration, nil
	}
	shown := files.Path(path)
	if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrSymlink) {
		// Not a state file: every later run would fail the same way, so
		// it needs a person (exit 78), not a retry (issue 21, item 6).
		return nil, "", &ConfigError{Err: fmt.Errorf("reading state file %s: %w: remove it (a person or another program put it there)", shown, err)}
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading state file %s: %w", shown, err)
	}
	st = &State{loaded: b}
	if uErr := yaml.Unmarshal(b, st); uErr != nil {
		aside, rErr := files.SetAside(path)
		if rErr != nil {
			return nil, "", fmt.Errorf("state file %s is corrupt (%v) and could not be kept aside: %w", shown, uErr, rErr)
		}
		return &State{}, fmt.Sprintf("state file %s is corrupt (%v): kept as %s, registering as new", shown, uErr, aside), nil
	}
	return st, "", nil
}

// Save writes the state through files (atomically on the host), creating
// its directory with 0700 as upstream does; an unchanged state is not
// written again.
func (s *State) Save(files host.FS, path string) error {
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	if bytes.Equal(b, s.loaded) {
		return nil
	}
	if err := files.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	if err := files.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	s.loaded = b
	return nil
}

// lock takes the state lock for a run that may write (not a dry run): the
// boot service, the update timer and an admin's --reset-network would
// otherwise interleave writes to the state, the manifest and the keyfiles.
func (r *run) lock(ctx context.Context) (unlock func(), err error) {
	if r.o.DryRun {
		return func() {}, nil
	}
	dir := path.Dir(r.o.StatePath)
	if err := r.files.MkdirAll(dir, 0o700); err != nil {
		return nil, &PhaseError{Phase: PhaseState, Err: fmt.Errorf("creating state directory: %w", err)}
	}
	wait := r.o.LockWait
	if wait <= 0 {
		wait = DefaultLockWait
	}
	if r.o.Deadline > 0 && r.o.Deadline < wait {
		wait = r.o.Deadline // --deadline bounds the whole run's wait
	}
	l, err := statelock.Acquire(ctx, r.files.Path(path.Join(dir, statelock.Name)), wait)
	if err != nil {
		var stopped *exitcode.StoppedError
		if errors.As(context.Cause(ctx), &stopped) {
			return nil, &PhaseError{Phase: PhaseState, Err: stopped}
		}
		// Logged as a phase's failure is: the final line leaves out the
		// error of a PhaseError, and this one names the holder's pid.
		r.log.WithField("phase", PhaseState).WithError(err).Error("[failed]")
		return nil, &PhaseError{Phase: PhaseState, Err: err}
	}
	r.removeStaleTemps()
	return func() { _ = l.Release() }, nil
}

// removeStaleTemps removes the temp files of writes a kill -9 cut short, in
// the directories the agent writes; the state lock is held, so none is in
// flight (issue 21, item 6).
func (r *run) removeStaleTemps() {
	for _, dir := range []string{path.Dir(r.o.StatePath), host.KeyfileDir, host.StateDir, catrust.Dir, path.Dir(host.Applicator), host.RuntimeKeyfileDir} {
		removed, err := atomicfile.RemoveStale(r.path(dir))
		if err != nil {
			r.log.WithField("phase", PhaseState).WithError(err).Warn("removing stale temp files")
		}
		for _, f := range removed {
			r.log.WithField("phase", PhaseState).WithField("file", f).Info("removed a temp file an interrupted run left")
		}
	}
}
