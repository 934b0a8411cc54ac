package apply

import (
	"bytes"
	"context"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// TestPlanKeepsGeneratorOrder: the plan (and so render, --dry-run, the
// applicator and the manifest) lists keyfiles in the order nmstate's gc
// lists them, not by file name. The state and order are nmstate vector
// 002-order-vlan-parent-in-file (nmstate/testdata/vectors): gc lists the
// VLAN after every priority-0 profile.
func TestPlanKeepsGeneratorOrder(t *testing.T) {
	state := "interfaces:\n" +
		"- {name: enp7s0.40, type: vlan, vlan: {base-iface: enp7s0, id: 40}, ipv4: {enabled: true, address: [{ip: 198.51.100.70, prefix-length: 27}]}, ipv6: {enabled: false}}\n" +
		"- {name: enp7s0, ipv4: {enabled: false}, ipv6: {enabled: false}}\n" +
		"- {name: enp8s0, ipv4: {enabled: false}, ipv6: {enabled: false}}\n"
	r := &Rendered{Configurator: protocol.ConfiguratorNmstate, Digested: []byte(state)}
	a := &Applier{Files: host.Root(t.TempDir()), Nmstate: NmstateBuiltin}
	p, err := a.Plan(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"enp7s0.nmconnection", "enp8s0.nmconnection", "enp7s0.40.nmconnection"}
	if len(p.Keyfiles) != len(want) {
		t.Fatalf("%d keyfiles, want %v", len(p.Keyfiles), want)
	}
	last := -1
	for i, kf := range p.Keyfiles {
		if kf.Name != want[i] {
			t.Fatalf("keyfile %d is %s, want the order %v", i, kf.Name, want)
		}
		at := bytes.Index(p.Applicator, []byte(kf.Name))
		if at < 0 || at < last {
			t.Fatalf("applicator does not list %s in the plan's order:\n%s", kf.Name, p.Applicator)
		}
		last = at
	}
}
