package netpolicy

import (
	"strings"
	"testing"
)

// TestOneProfilePerDevice: two profiles of one config that NetworkManager
// could both autoconnect on one device are refused, naming both; profiles
// of different devices pass.
func TestOneProfilePerDevice(t *testing.T) {
	eth := func(id, extra string) string {
		return "[connection]\nid=" + id + "\ntype=ethernet\n" + extra + "\n[ipv4]\nmethod=auto\n"
	}
	cases := []struct {
		name    string
		a, b    string
		refused bool
	}{
		{"same interface-name, higher priority", eth("a", "interface-name=eth0\n"), eth("b", "interface-name=eth0\nautoconnect-priority=100\n"), true},
		{"same interface-name, one autoconnect=false", eth("a", "interface-name=eth0\n"), eth("b", "interface-name=eth0\nautoconnect=false\n"), true},
		{"same MAC, other case", eth("a", "[ethernet]\nmac-address=52:54:00:aa:bb:cc\n"), eth("b", "[ethernet]\nmac-address=52:54:00:AA:BB:CC\n"), true},
		{"no binding and a named one", eth("a", ""), eth("b", "interface-name=eth1\n"), true},
		{"veth and ethernet of one name", eth("a", "interface-name=v0\n"), "[connection]\nid=b\ntype=veth\ninterface-name=v0\n[veth]\npeer=v1\n", true},
		{"a match pattern and a named one", eth("a", "[match]\ninterface-name=eth*\n"), eth("b", "interface-name=eth1\n"), true},
		{"a plain match name, the same device", eth("a", "[match]\ninterface-name=eth1\n"), eth("b", "interface-name=eth1\n"), true},
		{"a plain match name, another device", eth("a", "[match]\ninterface-name=eth0\n"), eth("b", "interface-name=eth1\n"), false},
		{"two NICs", eth("a", "interface-name=eth0\n"), eth("b", "interface-name=eth1\n"), false},
		{"named and MAC-identified", eth("a", "interface-name=eth0\n"), eth("b", "[ethernet]\nmac-address=52:54:00:aa:bb:cc\n"), false},
		{"ovs bridge and its interface", "[connection]\nid=br0-br\ntype=ovs-bridge\ninterface-name=br0\n", "[connection]\nid=br0-if\ntype=ovs-interface\ninterface-name=br0\n", false},
		{"bond and its port", "[connection]\nid=bond0\ntype=bond\ninterface-name=bond0\n", eth("p", "interface-name=eth0\nmaster=bond0\n"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckOneProfile([]Keyfile{kf("config.a", c.a), kf("config.b", c.b)})
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRefusal(t, err, "config.b [connection]", OneProfile)
			if r := err.(*Refusal); !strings.Contains(r.Reason, "config.a") {
				t.Errorf("the refusal does not name the other profile: %v", err)
			}
		})
	}
}

// TestHandOverAutoconnect: a set connection.autoconnect passes only when
// plainly on, however NetworkManager might read the other spellings; no
// key passes (NetworkManager's default is on).
func TestHandOverAutoconnect(t *testing.T) {
	eth := func(extra string) string {
		return "[connection]\nid=a\ntype=ethernet\n" + extra + "\n[ipv4]\nmethod=auto\n"
	}
	for _, v := range []string{"false", "FALSE", "0", "no", "off", "", "fals\\e", "maybe"} {
		err := CheckHandOverAutoconnect([]Keyfile{kf("config.b", eth("")), kf("config.a", eth("autoconnect="+v+"\n"))})
		wantRefusal(t, err, "config.a [connection] autoconnect", HandOverAutoconnect)
	}
	for _, extra := range []string{"", "autoconnect=true\n", "autoconnect=false\nautoconnect=True \n", "autoconnect=1\n", "autoconnect=yes\n"} {
		if err := CheckHandOverAutoconnect([]Keyfile{kf("config.a", eth(extra))}); err != nil {
			t.Errorf("%q refused: %v", extra, err)
		}
	}
}
