package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/netpolicy"
)

// paths are the host paths this package writes (internal/host's table),
// below the root of Applier.Files.
type paths struct {
	// KeyfileDir is where NetworkManager reads persistent profiles.
	KeyfileDir string
	// Applicator is the yip file. Upstream's name, so upstream's
	// --reset-network and its reset plan remove it too, and an image
	// installed by elemental-register is taken over instead of getting a
	// second applicator for the same NIC.
	Applicator string
	// StateDir holds the digested config and the manifest. No file in it
	// ends in .yaml/.yml: yip loads those from /oem recursively.
	StateDir string
}

// hostPaths are the Elemental locations (docs/apply.md: /oem is what every
// boot mode sees).
var hostPaths = paths{KeyfileDir: host.KeyfileDir, Applicator: host.Applicator, StateDir: host.StateDir}

const (
	// DefaultCheckpointTimeout is nmstatectl's own default rollback time.
	DefaultCheckpointTimeout = 60 * time.Second
	defaultCommandTimeout    = 2 * time.Minute
)

// ErrRolledBack marks a live apply that was undone: the previous network and
// the previous applicator are in place, trying again later may work (the
// agent exits 75).
var ErrRolledBack = errors.New("network change rolled back")

// LiveApplyError is a failed live apply; Step names what failed.
type LiveApplyError struct {
	Step        string
	Err         error
	RollbackErr error // non-nil when the way back failed too
}

// Class is the failed step's, when it declares one (a certificate the
// reachability check could not verify needs a person); any other failure
// was rolled back and may pass later: try again (exit 75).
func (e *LiveApplyError) Class() errclass.Class {
	if c, ok := errclass.Of(e.Err); ok {
		return c
	}
	return errclass.Transient
}

// Cause is the failed step's ("" when it names none).
func (e *LiveApplyError) Cause() string { return errclass.CauseOf(e.Err) }

func (e *LiveApplyError) Error() string {
	msg := fmt.Sprintf("apply network live: %s: %v", e.Step, e.Err)
	if e.RollbackErr != nil {
		msg += "; rolling back also failed: " + e.RollbackErr.Error()
	} else {
		msg += "; rolled back"
	}
	return msg
}

func (e *LiveApplyError) Unwrap() []error { return []error{e.Err, ErrRolledBack} }

// Applier plans, persists and applies rendered network configs on the host
// Files is. The zero value of every field but Files is usable. Its side
// effects go through the host edge only, Files and Runner: a dry run swaps
// in host.Print and host.PrintRunner.
type Applier struct {
	Files  host.FS     // required: the run's (agent.newEnv), a temp dir in tests
	Runner host.Runner // nil: host.ExecRunner
	// Nmstate chooses what makes the keyfiles of an nmstate config, and
	// so how it is applied live: nmstatectl (gc, then apply with a
	// checkpoint) or the built-in translator (keyfiles, installed and
	// activated as nmconnections). "": NmstateAuto.
	Nmstate NmstateChoice
	Tools   host.Tools // zero: host.DefaultTools
	Log     *logrus.Entry
	// Env is added to every command (e.g. DBUS_SYSTEM_BUS_ADDRESS).
	Env []string
	// CheckpointTimeout is nmstatectl apply --timeout; the reachability
	// check gets half of it so the commit lands before NetworkManager's
	// own rollback.
	CheckpointTimeout time.Duration
	// CommandTimeout bounds every other command.
	CommandTimeout time.Duration
	// Policy judges the config before any keyfile is generated or written
	// (netpolicy); the zero value allows no opt-in rule.
	Policy netpolicy.Policy
	// HandOver: the plan goes to the toolkit's install or reset, whose
	// boot brings it up with no live apply or reachability check first,
	// so every profile it writes must autoconnect (rule
	// handover-autoconnect, docs/apply.md "The rollback check tests the
	// next boot").
	HandOver bool
}

func (a *Applier) paths() paths { return hostPaths }

func (a *Applier) tools() host.Tools { return a.Tools.OrDefault() }

func (a *Applier) runner() host.Runner {
	if a.Runner == nil {
		return host.ExecRunner{}
	}
	return a.Runner
}

// files is the host edge the applier was handed; a nil one is the
// caller's mistake, not the live root.
func (a *Applier) files() host.FS {
	if a.Files == nil {
		panic("apply.Applier: no host.FS: the caller hands the machine's (agent.newEnv)")
	}
	return a.Files
}

func (a *Applier) log() *logrus.Entry { return logx.OrDiscard(a.Log) }

// host is where a host path is on this machine, for messages and the
// arguments of programs; reads and writes take the host path itself.
func (a *Applier) host(p string) string { return a.files().Path(p) }

func (a *Applier) checkpointTimeout() time.Duration {
	if a.CheckpointTimeout > 0 {
		return a.CheckpointTimeout
	}
	return DefaultCheckpointTimeout
}

// run runs c through the Runner with the applier's environment and the
// command timeout.
func (a *Applier) run(ctx context.Context, c host.Command) ([]byte, error) {
	c.Env = append(append([]string(nil), a.Env...), c.Env...)
	t := a.CommandTimeout
	if t <= 0 {
		t = defaultCommandTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	a.log().WithField("command", c.String()).Debug("running")
	return a.runner().Run(ctx, c)
}

// runFunc is run as a function value, for the keyfile generators.
func (a *Applier) runFunc() host.RunFunc { return a.run }
