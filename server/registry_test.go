package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

// twoNamesConfig is a registration with placeholders ip1 and ip2 taken from
// pools poolA and poolB.
func twoNamesConfig(t *testing.T, poolA, poolB, pools string) *regconfig.Config {
	t.Helper()
	c, err := regconfig.Parse([]byte(`
registrations:
- name: demo
  token: demo-token
  machineName: m-${System Information/UUID}
  config: {elemental: {registration: {auth: mac}}}
  network:
    configurator: nmstate
    ipAddresses: {ip1: ` + poolA + `, ip2: ` + poolB + `}
    config:
      interfaces: [{name: eth0, ipv4: {address: [{ip: "{ip1}", prefix-length: 24}, {ip: "{ip2}", prefix-length: 24}]}}]
pools:
` + pools))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// assertNoAddressTwice fails when any address is held by two claims.
func assertNoAddressTwice(t *testing.T, st *store.Store) int {
	t.Helper()
	n := 0
	st.View(func(s *store.State) {
		seen := map[string]string{}
		for _, c := range s.Claims {
			if c.Address == "" {
				continue
			}
			if other, dup := seen[c.Address]; dup {
				t.Fatalf("address %s held by claims %s and %s", c.Address, other, c.Name)
			}
			seen[c.Address] = c.Name
			n++
		}
	})
	return n
}

// Two placeholders of one machine from one pool get two addresses.
func TestRegistryAcrossPlaceholdersOfOneMachine(t *testing.T) {
	cfg := twoNamesConfig(t, "p", "p", "- {name: p, addresses: [10.8.0.10-10.8.0.11], prefix: 24}\n")
	st := memStore(t)
	s := newServer(t, cfg, st, nil)
	r := register(t, s, "uuid-a")
	if r.Network == nil {
		t.Fatal("no network config")
	}
	ip1, ip2 := r.Network.IPAddresses["ip1"], r.Network.IPAddresses["ip2"]
	if ip1 == ip2 || ip1 == "" || ip2 == "" {
		t.Fatalf("ip1=%q ip2=%q", ip1, ip2)
	}
	// The pool is now full: a second machine waits instead of sharing.
	if r := register(t, s, "uuid-b"); r.Network != nil {
		t.Fatalf("second machine got %v from a full pool", r.Network.IPAddresses)
	}
	if n := assertNoAddressTwice(t, st); n != 2 {
		t.Fatalf("%d addresses held, want 2", n)
	}
}

// A pool renamed between two runs of the server: the claims of the old
// pool still hold their addresses, and the new pool (same range) must not
// hand them out again. Tracking addresses per pool did.
func TestRegistryAcrossPools(t *testing.T) {
	st := memStore(t)
	before := twoNamesConfig(t, "old", "other", "- {name: old, addresses: [10.0.0.40-10.0.0.50], prefix: 24}\n- {name: other, addresses: [10.0.1.40-10.0.1.50], prefix: 24}\n")
	s := newServer(t, before, st, nil)
	r := register(t, s, "uuid-a")
	if r.Network.IPAddresses["ip1"] != "10.0.0.40" {
		t.Fatalf("first run: %v", r.Network.IPAddresses)
	}
	after := twoNamesConfig(t, "new", "other", "- {name: new, addresses: [10.0.0.40-10.0.0.60], prefix: 24}\n- {name: other, addresses: [10.0.1.40-10.0.1.50], prefix: 24}\n")
	s2 := newServer(t, after, st, nil)
	r = register(t, s2, "uuid-b")
	if got := r.Network.IPAddresses["ip1"]; got == "10.0.0.40" {
		t.Fatalf("second machine got 10.0.0.40, still held by the first machine's claim of pool old")
	}
	assertNoAddressTwice(t, st)
}

// Concurrent registrations with two placeholders from two pools: every
// address held by exactly one claim, none skipped.
func TestRegistryConcurrentTwoPools(t *testing.T) {
	cfg := twoNamesConfig(t, "a", "b", "- {name: a, addresses: [10.1.0.0/24], prefix: 24}\n- {name: b, addresses: [10.1.1.0/24], prefix: 24}\n")
	st := memStore(t)
	s := newServer(t, cfg, st, nil)
	const n = 120
	for _, err := range testutil.Concurrently(n, func(i int) error {
		r, err := handler(s).Get(context.Background(), machine(fmt.Sprintf("uuid-%03d", i)))
		if err == nil && (r.Network == nil || len(r.Network.IPAddresses) != 2) {
			err = fmt.Errorf("machine %d: no full network config", i)
		}
		return err
	}) {
		t.Fatal(err)
	}
	if got := assertNoAddressTwice(t, st); got != 2*n {
		t.Fatalf("%d addresses held, want %d", got, 2*n)
	}
}
