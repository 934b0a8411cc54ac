package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

var (
	goodIfnames = []string{"eth0", "enp1s0", "bond0.100", "br-ex", "wlp0s20f3", "abcdefghijklmno", "x"}
	badIfnames  = []string{"", ".", "..", "abcdefghijklmnop", "enp0s31f6-this-is-too-long", "eth 0:1", "eth0:1", "a/b", "eth\t0", "eth0\n", "e\vth"}
)

func TestCheckIfname(t *testing.T) {
	for _, n := range goodIfnames {
		if err := checkIfname("p", n); err != nil {
			t.Errorf("%q refused: %v", n, err)
		}
	}
	for _, n := range badIfnames {
		var fe *FieldError
		if err := checkIfname("p", n); !errors.As(err, &fe) || fe.Path != "p" {
			t.Errorf("%q accepted or not a field error: %v", n, err)
		}
	}
}

// TestRenderRefusesBadIfnames: each place of an nmstate state or a keyfile
// that binds a kernel interface, given a name the kernel refuses, makes
// Render fail with a field error naming that place.
func TestRenderRefusesBadIfnames(t *testing.T) {
	iface := func(extra string) map[string]string {
		return map[string]string{"interfaces": `[{"name":"eth0","type":"ethernet","state":"up"` + extra + `}]`}
	}
	nmstate := map[string]struct {
		parts map[string]string
		path  string
	}{
		"name":          {map[string]string{"interfaces": `[{"name":%q,"type":"ethernet"}]`}, "config.interfaces[0].name"},
		"controller":    {iface(`,"controller":%q`), "config.interfaces[0].controller"},
		"vlan base":     {iface(`,"vlan":{"base-iface":%q,"id":100}`), "config.interfaces[0].vlan.base-iface"},
		"bond port":     {iface(`,"link-aggregation":{"mode":"active-backup","port":["eth1",%q]}`), "config.interfaces[0].link-aggregation.port[1]"},
		"bridge port":   {iface(`,"bridge":{"port":[{"name":%q}]}`), "config.interfaces[0].bridge.port[0].name"},
		"next-hop-ifce": {map[string]string{"interfaces": `[{"name":"eth0","type":"ethernet"}]`, "routes": `{"config":[{"destination":"0.0.0.0/0","next-hop-interface":%q}]}`}, "config.routes.config[0].next-hop-interface"},
	}
	for name, c := range nmstate {
		for _, bad := range badIfnames {
			if bad == "" || bad == "." || bad == ".." {
				continue // the name check of checkNmstate catches these first
			}
			parts := map[string]string{}
			for k, v := range c.parts {
				if strings.Contains(v, "%q") {
					js, _ := json.Marshal(bad)
					v = strings.Replace(v, "%q", string(js), 1)
				}
				parts[k] = v
			}
			_, err := Render(nmstateConfig(t, nil, parts))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Path != c.path {
				t.Errorf("%s %q: %v, want a field error at %s", name, bad, err, c.path)
			}
		}
	}
	for _, good := range goodIfnames {
		parts := map[string]string{
			"interfaces": fmt.Sprintf(`[{"name":%q,"type":"ethernet","link-aggregation":{"port":[%q]},"vlan":{"base-iface":%q}}]`, good, good, good),
			"routes":     fmt.Sprintf(`{"config":[{"destination":"0.0.0.0/0","next-hop-interface":%q}]}`, good),
		}
		if _, err := Render(nmstateConfig(t, nil, parts)); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
	// Matched by MAC address, the name is only the profile's.
	if _, err := Render(nmstateConfig(t, nil, map[string]string{"interfaces": `[{"name":"management-network","identifier":"mac-address","mac-address":"52:54:00:00:00:01","type":"ethernet"}]`})); err != nil {
		t.Errorf("profile name with identifier mac-address: %v", err)
	}
}

func TestRenderRefusesBadKeyfileIfnames(t *testing.T) {
	keyfile := func(body string) *protocol.NetworkConfig {
		return &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNmconnections,
			Config: map[string]protocol.RawValue{"c1": {Value: "[connection]\nid=c1\ntype=ethernet\n" + body}}}
	}
	for _, bad := range []string{"enp0s31f6-this-is-too-long", "eth 0:1", "eth0:1", "a/b", ".."} {
		for _, body := range []string{"interface-name=" + bad + "\n", "[vlan]\nid=5\nparent=" + bad + "\n"} {
			_, err := Render(keyfile(body))
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.Contains(fe.Path, "config.c1") || !strings.Contains(err.Error(), "interface name") {
				t.Errorf("%q: %v", body, err)
			}
		}
	}
	for _, body := range []string{"interface-name=eth0\n", "[vlan]\nid=5\nparent=0b4a3c55-1d2e-4f60-8a9b-0c1d2e3f4a5b\n", "[vlan]\nid=5\nparent=eth0\n"} {
		if _, err := Render(keyfile(body)); err != nil {
			t.Errorf("%q refused: %v", body, err)
		}
	}
}
