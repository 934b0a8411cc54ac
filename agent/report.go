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
)

// networkFailed keeps a failed plan or apply in the state file, so the
// next successful connection reports it (netreport.Annotate), and returns
// err. A dry run, a run without a config and a stopped run record nothing.
// It is phaseList's failed for PhasePlan and PhaseApply.
func networkFailed(ctx context.Context, e *env, h *handoffs, p Phase, err error) error {
	var stopped *exitcode.StoppedError
	if e.o.DryRun || h.fetched.net == nil || errors.As(err, &stopped) || errors.As(context.Cause(ctx), &stopped) {
		return err
	}
	st := h.fetched.reg.state
	st.NetworkErrorKind, st.NetworkError = netreport.Classify(p == PhasePlan, err)
	st.NetworkErrorPhase = string(p)
	st.NetworkErrorInterfaces = strings.Join(slices.Sorted(maps.Keys(apply.InterfaceAddresses(h.fetched.net.rendered))), ",")
	if h.id.tpm != nil {
		st.SetAKBlob(h.id.tpm.AKBlob())
	}
	if sErr := st.Save(e.files, e.o.StatePath); sErr != nil {
		e.log.WithField("phase", p).WithError(sErr).Warn("the network error could not be kept in the state file")
	}
	return err
}
