package main

import (
	"net/netip"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

// Every machine of the largest storm has a loopback address of its own,
// none of them the server's; behind the NAT they share one.
func TestStormAddresses(t *testing.T) {
	loop := netip.MustParsePrefix("127.0.0.0/8")
	seen := map[netip.Addr]int{}
	for i := range 62500 {
		a := stormAddr(i, false)
		if !loop.Contains(a) || a == netip.MustParseAddr("127.0.0.1") || a.As4()[3] == 0 || a.As4()[3] == 255 {
			t.Fatalf("machine %d: address %s", i, a)
		}
		if j, dup := seen[a]; dup {
			t.Fatalf("machines %d and %d share %s", j, i, a)
		}
		seen[a] = i
	}
	if stormAddr(0, true) != stormAddr(4999, true) || !loop.Contains(stormAddr(0, true)) {
		t.Errorf("NAT mode: %s and %s", stormAddr(0, true), stormAddr(4999, true))
	}
}

func TestCounts(t *testing.T) {
	if got, err := counts("1000, 5000"); err != nil || len(got) != 2 || got[0] != 1000 || got[1] != 5000 {
		t.Errorf("counts: %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "-1", "10,x"} {
		if _, err := counts(bad); err == nil {
			t.Errorf("counts(%q) accepted", bad)
		}
	}
}

// The storm counts the conflict by the text elemental-operator sends
// (docs/protocol.md 7.5), which regserver's --fault-update-conflict repeats.
func TestRefusalKindNamesTheConflict(t *testing.T) {
	conflict := &protocol.ErrorReply{Message: `MachineInventory update failed: failed to update machine inventory fleet-default/m-1: ` +
		`Operation cannot be fulfilled on machineinventories.elemental.cattle.io "m-1": ` +
		`the object has been modified; please apply your changes to the latest version and try again`}
	if got := refusalKind(conflict); got != "Kubernetes conflict" {
		t.Errorf("refusalKind(conflict) = %q", got)
	}
	if got := refusalKind(&protocol.ErrorReply{Reason: protocol.ReasonRateLimited, Message: "try again in 1s"}); got != protocol.ReasonRateLimited {
		t.Errorf("refusalKind(RateLimited) = %q", got)
	}
}
