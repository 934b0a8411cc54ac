package netreport

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/errclass"
)

func TestClassify(t *testing.T) {
	long := errors.New(strings.Repeat("x", 400) + "\nsecond line")
	for _, c := range []struct {
		inPlan bool
		err    error
		kind   string
	}{
		// Wrapped as agent's PhaseError wraps it (its "apply: " prefix).
		{false, fmt.Errorf("apply: %w", &apply.LiveApplyError{Step: "reachability check", Err: errors.New("timeout")}), KindRolledBack},
		{false, &apply.LiveApplyError{Step: "connection up", Err: errors.New("no device")}, KindNMRefused},
		{false, &apply.LiveApplyError{Step: "nmstatectl apply", Err: errors.New("failed")}, KindNMRefused},
		{false, &apply.LiveApplyError{Step: "persist", Err: errors.New("disk full")}, KindApply},
		{false, &apply.NotOwnedError{Path: "/etc/NetworkManager/system-connections/eth0.nmconnection"}, KindRefused},
		{true, &errclass.ConfigError{Err: errors.New("policy: address outside the allowed prefixes")}, KindRefused},
		{true, errors.New("nmstatectl gc: killed"), KindApply},
		{false, long, KindApply},
	} {
		kind, reason := Classify(c.inPlan, c.err)
		if kind != c.kind {
			t.Errorf("%v (in plan %v): kind %s, want %s", c.err, c.inPlan, kind, c.kind)
		}
		if strings.ContainsAny(reason, "\r\n") || len(reason) > MaxReason {
			t.Errorf("reason %q is not one bounded line", reason)
		}
	}
}
