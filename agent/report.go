package agent

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/state"
)

// networkFailed is the state that keeps a failed plan or apply (err, in
// phase p, of the network config net), so the next successful connection
// reports it (netreport.Annotate): st with the error recorded, which the
// runner saves. A dry run, a run without a config and a stopped run record
// nothing (nil). It is phaseList's failed for PhasePlan and PhaseApply.
func networkFailed(ctx context.Context, e *env, p Phase, err error, net *netConfig, st state.State) *state.State {
	var stopped *exitcode.StoppedError
	if e.o.DryRun || net == nil || errors.As(err, &stopped) || errors.As(context.Cause(ctx), &stopped) {
		return nil
	}
	st.NetworkErrorKind, st.NetworkError = netreport.Classify(p == PhasePlan, err)
	st.NetworkErrorPhase = string(p)
	st.NetworkErrorInterfaces = strings.Join(slices.Sorted(maps.Keys(apply.InterfaceAddresses(net.rendered))), ",")
	return &st
}
