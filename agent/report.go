package agent

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/verify"
	"github.com/nodereg/nodereg/apply"
)

// What went wrong with a network config, as reported back
// (docs/annotations.md, network-config.<interface>.error-kind).
const (
	errKindApply      = "apply-failed"
	errKindRolledBack = "rolled-back"
	errKindRefused    = "refused"
	errKindNMRefused  = "nm-refused"
)

// maxReason bounds a reported reason: one line of an annotation.
const maxReason = 256

// classifyNetworkError names what a failed plan or apply was, with a
// one-line reason.
func classifyNetworkError(p Phase, err error) (kind, reason string) {
	var live *apply.LiveApplyError
	var notOurs *apply.NotOwnedError
	kind = errKindApply
	switch {
	case errors.As(err, &live) && live.Step == "reachability check":
		kind = errKindRolledBack
	case errors.As(err, &live) && (strings.HasPrefix(live.Step, "connection ") || live.Step == "nmstatectl apply"):
		kind = errKindNMRefused
	case errors.As(err, &notOurs), p == PhasePlan && exitcode.Of(err) == exitcode.Config:
		kind = errKindRefused
	}
	reason = err.Error()
	if i := strings.IndexAny(reason, "\r\n"); i >= 0 {
		reason = reason[:i]
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason-3] + "..."
	}
	return kind, reason
}

// networkFailed keeps a failed plan or apply in the state file, so the
// next successful connection reports it (reportInterfaces), and returns
// err. A dry run, a run without a config and a stopped run record nothing.
func (r *run) networkFailed(ctx context.Context, p Phase, net *fetched, err error) error {
	var stopped *exitcode.StoppedError
	if r.o.DryRun || net == nil || errors.As(err, &stopped) || errors.As(context.Cause(ctx), &stopped) {
		return err
	}
	st := r.state
	st.NetworkErrorKind, st.NetworkError = classifyNetworkError(p, err)
	st.NetworkErrorPhase = p
	st.NetworkErrorInterfaces = strings.Join(slices.Sorted(maps.Keys(apply.InterfaceAddresses(net.rendered))), ",")
	if r.tpm != nil {
		st.SetAKBlob(r.tpm.AKBlob())
	}
	if sErr := st.Save(r.files, r.o.StatePath); sErr != nil {
		r.log.WithField("phase", p).WithError(sErr).Warn("the network error could not be kept in the state file")
	}
	return err
}

// clearNetworkError forgets a recorded error: a later apply succeeded.
func (s *State) clearNetworkError() {
	s.NetworkError, s.NetworkErrorKind, s.NetworkErrorPhase, s.NetworkErrorInterfaces = "", "", "", ""
}

// reportInterfaces adds the per-interface annotations (docs/annotations.md):
// each interface of the applied config with its state and digest, and
// each interface of a config that failed with the error kept from then.
func reportInterfaces(a map[string]string, st *State, netState string) {
	key := func(ifname, k string) string { return "network-config." + ifname + "." + k }
	errKeys := []string{"error", "error-kind", "error-phase"}
	// Upstream servers store annotations key by key and never drop one,
	// so a cleared error is sent as empty values, not left out.
	if st.NetworkState != "" || st.NetworkError != "" {
		for _, k := range errKeys {
			a["network-config."+k] = ""
		}
	}
	for ifname := range verify.ParseAddresses(st.NetworkAddresses) {
		if st.NetworkState != "" {
			a[key(ifname, "state")] = st.NetworkState
			for _, k := range errKeys {
				a[key(ifname, k)] = ""
			}
		}
		if st.NetworkDigest != "" {
			a[key(ifname, "digest")] = st.NetworkDigest
		}
	}
	if st.NetworkDigest != "" {
		a["network-config.digest"] = st.NetworkDigest
	}
	if st.NetworkDrift != "" {
		a["network-config.drift-repaired"] = st.NetworkDrift
	}
	if st.NetworkError == "" {
		return
	}
	if netState != netStatePending {
		a["network-config.state"] = netStateError
	}
	a["network-config.error-phase"] = string(st.NetworkErrorPhase)
	a["network-config.error-kind"] = st.NetworkErrorKind
	a["network-config.error"] = st.NetworkError
	for _, ifname := range strings.Split(st.NetworkErrorInterfaces, ",") {
		if ifname == "" {
			continue
		}
		a[key(ifname, "state")] = netStateError
		a[key(ifname, "error-phase")] = string(st.NetworkErrorPhase)
		a[key(ifname, "error-kind")] = st.NetworkErrorKind
		a[key(ifname, "error")] = st.NetworkError
	}
}
