package netpolicy

import "testing"

func TestInvalidUTF8RefusedFirst(t *testing.T) {
	// The [tc] section would be refused by the unknown rule: the UTF-8
	// refusal comes first, naming the key.
	k := kf("gc output eth0.nmconnection", "[tc]\nqdisc.root=fq\n[connection]\nid=eth0\ninterface-name=eth0\xff\ntype=ethernet\n")
	wantRefusal(t, Policy{}.CheckKeyfiles([]Keyfile{k}), "gc output eth0.nmconnection [connection] interface-name", Names)
	wantRefusal(t, Policy{}.CheckKeyfiles([]Keyfile{kf("x", "[connection]\n# \xff\nid=x\n")}), "x line 2", Names)
	state := map[string]any{"hostname": map[string]any{"config": "h"}, "interfaces": []any{map[string]any{"name": "eth0", "description": "\xc3("}}}
	wantRefusal(t, Policy{}.CheckState(state), "config.interfaces[0].description", Names)
}

func TestPercentInInterfaceNameRefused(t *testing.T) {
	k := kf("gc output eth0.nmconnection", "[connection]\nid=eth0\ninterface-name=eth%d\ntype=ethernet\n")
	wantRefusal(t, Policy{}.CheckKeyfiles([]Keyfile{k}), "gc output eth0.nmconnection [connection] interface-name", Names)
}
