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
func (r *run) networkFailed(ctx context.Context, p Phase, net *fetched, err error) error {
	var stopped *exitcode.StoppedError
	if r.o.DryRun || net == nil || errors.As(err, &stopped) || errors.As(context.Cause(ctx), &stopped) {
		return err
	}
	st := r.state
	st.NetworkErrorKind, st.NetworkError = netreport.Classify(p == PhasePlan, err)
	st.NetworkErrorPhase = string(p)
	st.NetworkErrorInterfaces = strings.Join(slices.Sorted(maps.Keys(apply.InterfaceAddresses(net.rendered))), ",")
	if r.tpm != nil {
		st.SetAKBlob(r.tpm.AKBlob())
	}
	if sErr := st.Save(r.files, r.o.StatePath); sErr != nil {
		r.log.WithField("phase", p).WithError(sErr).Warn("the network error could not be kept in the state file")
	}
	return err
}
