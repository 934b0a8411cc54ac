package agent

import (
	"context"
	"errors"
	"io/fs"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/verify"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
)

// Verify is `agent verify` (docs/verify.md): it reads the config and state
// files as they are (a corrupt state file is a failed finding, not kept
// aside: verify writes nothing) and checks the node against them.
func Verify(ctx context.Context, o Options) *verify.Report {
	return verify.Run(ctx, verifyInput(o))
}

// verifyInput gathers what the checks read; the update run's drift check
// uses the same.
func verifyInput(o Options) verify.Input {
	e := newEnv(o)
	files := e.root
	in := verify.Input{Files: files, Runner: e.runner, Nmcli: e.tools.Nmcli, BootstrapKeyfiles: bootstrapKeyfiles}
	verifyState(&in, files, e.o.StatePath)
	f, err := localconfig.Read(files, e.o.ConfigPath, e.o.Overrides, nil)
	if err != nil {
		in.ConfigProblem = err.Error()
	} else {
		reg := f.Config.Elemental.Registration
		in.ServerURL = reg.URL
		ca, err := localconfig.CA(files, reg.CACert)
		if err != nil {
			in.ConfigProblem = err.Error()
		} else if b, err := (catrust.Trust{Files: files}).Bundle(ca); err == nil {
			ca = b // during a rotation: the CA in force and the pending one
		}
		in.CA = ca
	}
	return in
}

// bootstrapKeyfiles are the bootstrap network's, for verify's bootstrap
// finding.
var bootstrapKeyfiles = verify.BootstrapKeyfiles{Prefix: bootstrap.RuntimeKeyfiles.Prefix, Owned: bootstrap.RuntimeKeyfiles.Owned}

// verifyState reads the state file as it is: verify keeps nothing aside.
func verifyState(in *verify.Input, files host.FS, path string) {
	st, err := state.Inspect(files, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		in.StateProblem = "no state file " + files.Path(path) + ": never registered"
	case err != nil:
		in.StateProblem = err.Error()
	default:
		in.State = st
	}
}
