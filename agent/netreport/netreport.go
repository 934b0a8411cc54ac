// Package netreport says what went wrong with a network config and writes
// the annotations that report a node's network state (docs/annotations.md).
package netreport

import (
	"errors"
	"strings"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/state"
)

// Network config states reported back to the server as annotations.
const (
	StatePending = "pending"
	StateReady   = "ready"
	StateApplied = "applied"
	StateError   = "error"
)

// What went wrong with a network config, as reported back
// (docs/annotations.md, network-config.<interface>.error-kind).
const (
	KindApply      = "apply-failed"
	KindRolledBack = "rolled-back"
	KindRefused    = "refused"
	KindNMRefused  = "nm-refused"
)

// MaxReason bounds a reported reason: one line of an annotation.
const MaxReason = 256

// Classify names what a failed plan (inPlan) or apply was, with a
// one-line reason.
func Classify(inPlan bool, err error) (kind, reason string) {
	var live *apply.LiveApplyError
	var notOurs *apply.NotOwnedError
	kind = KindApply
	switch {
	case errors.As(err, &live) && live.Step == "reachability check":
		kind = KindRolledBack
	case errors.As(err, &live) && (strings.HasPrefix(live.Step, "connection ") || live.Step == "nmstatectl apply"):
		kind = KindNMRefused
	case errors.As(err, &notOurs), inPlan && errclass.Is(err, errclass.Config):
		kind = KindRefused
	}
	reason = err.Error()
	if i := strings.IndexAny(reason, "\r\n"); i >= 0 {
		reason = reason[:i]
	}
	if len(reason) > MaxReason {
		reason = reason[:MaxReason-3] + "..."
	}
	return kind, reason
}

// Annotate adds the per-interface annotations (docs/annotations.md):
// each interface of the applied config with its state and digest, and
// each interface of a config that failed with the error kept from then.
// netState is the network-config.state already reported; a pending one
// is not overridden by the kept error.
func Annotate(a map[string]string, rec state.Network, netState string) {
	key := func(ifname, k string) string { return "network-config." + ifname + "." + k }
	errKeys := []string{"error", "error-kind", "error-phase"}
	// Upstream servers store annotations key by key and never drop one,
	// so a cleared error is sent as empty values, not left out.
	if rec.NetworkState != "" || rec.NetworkError != "" {
		for _, k := range errKeys {
			a["network-config."+k] = ""
		}
	}
	for ifname := range rec.Addresses() {
		if rec.NetworkState != "" {
			a[key(ifname, "state")] = rec.NetworkState
			for _, k := range errKeys {
				a[key(ifname, k)] = ""
			}
		}
		if rec.NetworkDigest != "" {
			a[key(ifname, "digest")] = rec.NetworkDigest
		}
	}
	if rec.NetworkDigest != "" {
		a["network-config.digest"] = rec.NetworkDigest
	}
	if rec.NetworkDrift != "" {
		a["network-config.drift-repaired"] = rec.NetworkDrift
	}
	if rec.NetworkError == "" {
		return
	}
	if netState != StatePending {
		a["network-config.state"] = StateError
	}
	a["network-config.error-phase"] = rec.NetworkErrorPhase
	a["network-config.error-kind"] = rec.NetworkErrorKind
	a["network-config.error"] = rec.NetworkError
	for _, ifname := range strings.Split(rec.NetworkErrorInterfaces, ",") {
		if ifname == "" {
			continue
		}
		a[key(ifname, "state")] = StateError
		a[key(ifname, "error-phase")] = rec.NetworkErrorPhase
		a[key(ifname, "error-kind")] = rec.NetworkErrorKind
		a[key(ifname, "error")] = rec.NetworkError
	}
}
