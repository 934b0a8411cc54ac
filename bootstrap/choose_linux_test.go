package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// labConfig is a bootstrap config for the lab's node: one keyfile on
// nrbs0, its address from src (YAML under ipAddresses.boot-ip).
func labConfig(t *testing.T, src string) *Config {
	t.Helper()
	return mustConfig(t, node.BootstrapKeyfile{Key: "boot", ID: "boot", Iface: nodeIf, Sources: src}.File())
}

// identityStartingAt finds a machine UUID whose range walk starts at the
// given position of a two-address range, so both paths are exercised
// whatever the hash does.
func identityStartingAt(pos uint64) Facts {
	for i := 0; ; i++ {
		u := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		if startOffset("uuid:"+u)%2 == pos {
			return Facts{UUID: u}
		}
	}
}

func chooseIn(t *testing.T, ns string, c *Config, f Facts) (*Plan, error) {
	t.Helper()
	var p *Plan
	var err error
	labkit.Enter(t, ns, func() { p, err = Choose(context.Background(), c, f, fastProber()) })
	return p, err
}

// The lab's peer holds .5; the range is .5-.6. A machine whose walk starts
// at .5 finds it taken (by the peer's MAC) and gets .6; one starting at .6
// gets .6 straight away. The held address is never chosen.
func TestChooseRangeSkipsHeldAddress(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	c := labConfig(t, "          range: {start: "+heldAddr+", end: "+freeAddr+", prefix: 24}\n")

	p, err := chooseIn(t, l.node, c, identityStartingAt(0))
	if err != nil {
		t.Fatal(err)
	}
	ch := p.Choices[0]
	if ch.FirstTry.String() != heldAddr || ch.Address.String() != freeAddr || !ch.Probed || ch.Interface != nodeIf {
		t.Fatalf("walk from the held address: %+v", ch)
	}
	if len(ch.Taken) != 1 || ch.Taken[0].Address.String() != heldAddr || ch.Taken[0].Holder.String() != peerMAC {
		t.Fatalf("conflicts recorded: %+v", ch.Taken)
	}
	if p.Network.IPAddresses["boot-ip"] != freeAddr || p.Network.Configurator != "nmconnections" {
		t.Fatalf("network %+v", p.Network)
	}

	p, err = chooseIn(t, l.node, c, identityStartingAt(1))
	if err != nil {
		t.Fatal(err)
	}
	if ch := p.Choices[0]; ch.FirstTry.String() != freeAddr || ch.Address.String() != freeAddr || len(ch.Taken) != 0 {
		t.Fatalf("walk from the free address: %+v", ch)
	}
}

func TestChooseRangeExhausted(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	c := labConfig(t, "          range: {start: "+heldAddr+", end: "+heldAddr+", prefix: 24}\n")
	_, err := chooseIn(t, l.node, c, Facts{UUID: "x"})
	var ee *ExhaustedError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), heldAddr+" by "+peerMAC) {
		t.Fatalf("range whose only address is held: %v", err)
	}
}

func TestChooseStaticAddressHeld(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	src := "          static:\n          - uuid: a\n            address: " + heldAddr + "\n          - uuid: b\n            address: " + freeAddr + "\n"
	c := labConfig(t, src)
	_, err := chooseIn(t, l.node, c, Facts{UUID: "a"})
	var te *TakenError
	if !errors.As(err, &te) || te.Holder.String() != peerMAC || !strings.Contains(err.Error(), Key+".ipAddresses.boot-ip: static address "+heldAddr) {
		t.Fatalf("static address held by the peer: %v", err)
	}
	p, err := chooseIn(t, l.node, c, Facts{UUID: "b"})
	if err != nil || p.Network.IPAddresses["boot-ip"] != freeAddr || !p.Choices[0].Probed {
		t.Fatalf("free static address: %+v, %v", p, err)
	}
}

// A probe that cannot run is an error, never a free address.
func TestChooseProbeFailureIsAnError(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	c := labConfig(t, "          range: {start: "+heldAddr+", end: "+freeAddr+", prefix: 24}\n          interface: nrbsgone\n")
	p, err := chooseIn(t, l.node, c, Facts{UUID: "x"})
	if err == nil || !strings.Contains(err.Error(), "nrbsgone") || !strings.Contains(err.Error(), Key+".ipAddresses.boot-ip: probing") {
		t.Fatalf("probe on a missing interface: %+v, %v", p, err)
	}
}
