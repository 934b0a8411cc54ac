package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// TestHandOverPlanRefusesNoAutoconnect: a hand-over plan (Applier.HandOver)
// refuses a profile that would not autoconnect at boot, server keyfile or
// nmstate `state: down` through the built-in translator, with rule
// handover-autoconnect naming the key, and writes nothing; the same config
// still plans for a boot, whose live apply checks it, and an autoconnecting
// one still plans for a hand-over.
func TestHandOverPlanRefusesNoAutoconnect(t *testing.T) {
	keyfile := func(extra string) *protocol.NetworkConfig {
		return &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNmconnections,
			Config: map[string]protocol.RawValue{"eth0": {Value: "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n" + extra + "\n[ipv4]\nmethod=auto\n"}}}
	}
	nmstateDown := &Rendered{Configurator: protocol.ConfiguratorNmstate, Digested: []byte("interfaces:\n- {name: eth0, type: ethernet, state: down}\n")}
	render := func(nc *protocol.NetworkConfig) *Rendered {
		r, err := Render(nc)
		testutil.Must(t, err)
		return r
	}
	cases := []struct {
		name    string
		r       *Rendered
		path    string // "": a hand-over plans it
		refused bool
	}{
		{"keyfile autoconnect=false", render(keyfile("autoconnect=false\n")), "config.eth0.nmconnection [connection] autoconnect", true},
		{"keyfile autoconnect=0, last key wins", render(keyfile("autoconnect=true\nautoconnect=0\n")), "config.eth0.nmconnection [connection] autoconnect", true},
		{"keyfile autoconnect=FALSE with a trailing blank", render(keyfile("autoconnect=FALSE \n")), "config.eth0.nmconnection [connection] autoconnect", true},
		{"nmstate state: down", nmstateDown, "builtin output eth0.nmconnection [connection] autoconnect", true},
		{"keyfile without autoconnect", render(keyfile("")), "", false},
		{"keyfile autoconnect=true", render(keyfile("autoconnect=true\n")), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			before := testutil.Tree(t, root)
			a := &Applier{Files: host.Root(root), Nmstate: NmstateBuiltin}
			mustPlan(t, a, c.r) // a boot plans it: its live apply checks what the boot brings
			a.HandOver = true
			p, err := a.Plan(context.Background(), c.r)
			if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
				t.Errorf("planning wrote:\n%s", d)
			}
			if !c.refused {
				if err != nil || len(p.Keyfiles) != 1 {
					t.Fatalf("hand-over plan of an autoconnecting profile: %v", err)
				}
				return
			}
			var r *netpolicy.Refusal
			if !errors.As(err, &r) || r.Rule != netpolicy.HandOverAutoconnect || r.Path != c.path {
				t.Fatalf("got %v; want a refusal of %s by rule %s", err, c.path, netpolicy.HandOverAutoconnect)
			}
			if !strings.Contains(err.Error(), "rule "+string(netpolicy.HandOverAutoconnect)) {
				t.Errorf("the message does not name the rule: %v", err)
			}
		})
	}
}
