package agent

import (
	"context"
	"errors"
	"strings"

	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/verify"
	"github.com/nodereg/nodereg/internal/state"
)

// maxDrift bounds the drift summary kept and reported.
const maxDrift = 512

// driftFindings are the verify checks that compare the live network with
// the applied config (docs/verify.md); drift repair acts on them alone.
var driftFindings = []string{verify.Applicator, verify.Addresses, verify.Profiles}

// errForeign: drift found, but a profile that is not ours holds an
// interface of ours; someone took it on purpose, so nothing is re-applied.
var errForeign = errors.New("a profile that is not ours is active on an interface of the applied config")

// drifted runs verify's network checks against the state and says what
// drifted ("" for nothing).
func (e *env) drifted(ctx context.Context, ph *phase, st *state.State) (string, error) {
	in := verify.Input{
		Files: ph.files, Runner: ph.runner, Nmcli: e.tools.Nmcli,
		State: st, BootstrapKeyfiles: bootstrapKeyfiles,
	}
	rep := verify.Run(ctx, in)
	var what []string
	for _, name := range driftFindings {
		if f := rep.Find(name); f.Status == verify.Failed {
			what = append(what, name+": "+f.Detail)
		}
	}
	s := strings.Join(what, "; ")
	if len(s) > maxDrift {
		s = s[:maxDrift-3] + "..."
	}
	if s != "" && rep.ForeignActive {
		return s, errForeign
	}
	return s, nil
}

// repairDrift is the update run's (Options.RepairDrift) check when the
// server's config is the applied one: if the live network drifted from
// it, the same config is planned and applied again, with the checkpoint
// and rollback of any live apply, and what drifted is kept for the
// annotations (network-config.drift-repaired). It returns the state with
// that recorded.
func (e *env) repairDrift(ctx context.Context, ph *phase, in applyInput) (state.State, error) {
	st := in.state
	what, err := e.drifted(ctx, ph, &st)
	switch {
	case errors.Is(err, errForeign):
		ph.log.WithField("drifted", what).Warn("network drifted, not repaired: " + err.Error())
		return st, nil
	case what == "":
		ph.log.Debug("no drift: the live network is the applied config")
		return st, nil
	}
	ph.log.WithField("drifted", what).Warn("the live network drifted from the applied config: applying it again")
	a := in.conf.applier(ph)
	plan, err := a.Plan(ctx, in.net.rendered)
	if err != nil {
		return st, err
	}
	if err := a.ApplyLive(ctx, plan, func(ctx context.Context) error { return e.serverReachable(ctx, ph, in.reg) }); err != nil {
		return st, err
	}
	st.NetworkDrift = what
	st.NetworkState = netreport.StateApplied
	ph.log.WithField("digest", plan.Digest()).Info("drift repaired: the applied config is live again")
	return st, nil
}
