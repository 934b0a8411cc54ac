package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/verify"
	"github.com/nodereg/nodereg/internal/host"
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
	if o.Root == "" {
		o.Root = "/"
	}
	if o.ConfigPath == "" {
		o.ConfigPath = DefaultConfigPath
	}
	if o.StatePath == "" {
		o.StatePath = DefaultStatePath
	}
	runner := o.Runner
	if runner == nil {
		runner = host.ExecRunner{}
	}
	files := host.Root(o.Root)
	in := verify.Input{Files: files, Runner: runner, Nmcli: host.ToolsFromEnv(os.Getenv).Nmcli}
	in.State = verifyState(files, o.StatePath)
	f, err := localconfig.Read(files, o.ConfigPath, o.Overrides, nil)
	if err != nil {
		in.ConfigProblem = err.Error()
	} else {
		reg := f.Config.Elemental.Registration
		in.ServerURL = reg.URL
		in.CA = localconfig.CA(files, reg.CACert)
		if b, err := (catrust.Trust{Files: files}).Bundle(in.CA); err == nil {
			in.CA = b // during a rotation: the CA in force and the pending one
		}
	}
	return in
}

// verifyState reads the state file without LoadState's setting aside.
func verifyState(files host.FS, path string) verify.State {
	b, err := files.ReadFile(path, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return verify.State{Problem: "no state file " + files.Path(path) + ": never registered"}
	}
	if err != nil {
		return verify.State{Problem: "reading state file: " + err.Error()}
	}
	var st State
	if err := yaml.Unmarshal(b, &st); err != nil {
		return verify.State{Problem: "state file " + files.Path(path) + " is corrupt: " + err.Error()}
	}
	return verify.State{
		Registered: st.Registered(),
		Digest:     st.NetworkDigest,
		Addresses:  verify.ParseAddresses(st.NetworkAddresses),
		// A refused or failed config is kept to report back: verify
		// fails on it (docs/verify.md).
		NetworkError: st.NetworkError, NetworkErrorKind: st.NetworkErrorKind, NetworkErrorPhase: string(st.NetworkErrorPhase),
	}
}
