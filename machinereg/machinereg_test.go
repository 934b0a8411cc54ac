package machinereg

import (
	"os"
	"strings"
	"testing"
)

const network = `configurator: nmstate
ipAddresses:
  b-ip: {apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: pool-b}
  a-ip: {apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: pool-a}
config:
  interfaces:
  - name: eth0
    ipv4: {address: [{ip: "{a-ip}", prefix-length: 24}, {ip: "{b-ip}", prefix-length: 24}]}
`

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+by) + "\n"
}

func TestParseShapes(t *testing.T) {
	whole := "apiVersion: elemental.cattle.io/v1beta1\nkind: MachineRegistration\nmetadata: {name: r, namespace: ns}\nspec:\n  config:\n    network:\n" + indent(network, "      ")
	for _, c := range []struct{ name, in, what string }{
		{"whole resource", whole, "MachineRegistration ns/r spec.config.network"},
		{"spec.config.network", network, "network template (a MachineRegistration's spec.config.network)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := Parse([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if in.What != c.what || len(in.Pools) != 2 || in.Pools["a-ip"].Name != "pool-a" {
				t.Fatalf("%q %+v", in.What, in.Pools)
			}
			nc, as, err := in.Resolve(map[string]string{"b-ip": "10.0.0.7/24"})
			if err != nil {
				t.Fatal(err)
			}
			// a-ip: no --set, the first sample; b-ip: the --set address
			// without its prefix, as the operator sends it.
			if nc.IPAddresses["a-ip"] != SampleFirst || nc.IPAddresses["b-ip"] != "10.0.0.7" || !as[0].Sample || as[1].Sample {
				t.Errorf("%v %+v", nc.IPAddresses, as)
			}
		})
	}
}

func TestParseNetworkConfigAsItIs(t *testing.T) {
	b, err := os.ReadFile("../examples/network/nmconnections.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := Parse(b)
	if err != nil || in.Pools != nil {
		t.Fatalf("%v %+v", err, in)
	}
	nc, _, err := in.Resolve(nil)
	if err != nil || nc.IPAddresses["inventory-ip"] != "192.168.123.150" {
		t.Fatalf("%v %v", err, nc)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"another kind", "apiVersion: v1\nkind: ConfigMap\n", "kind ConfigMap (apiVersion v1): render takes"},
		{"another group", "apiVersion: x.example/v1\nkind: MachineRegistration\n", "kind MachineRegistration (apiVersion x.example/v1)"},
		{"no network", "apiVersion: elemental.cattle.io/v1beta1\nkind: MachineRegistration\nmetadata: {name: r}\nspec: {config: {}}\n", "has no spec.config.network"},
		{"typo in the template", strings.Replace(network, "configurator:", "configuratr:", 1), "field configuratr not found"},
		{"typo in a pool", strings.Replace(network, "apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: pool-b", "kind: InClusterIPPool, nme: pool-b", 1), "field nme not found"},
		{"a list", "- a\n", "not a YAML mapping"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Parse([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

func TestResolveRefuses(t *testing.T) {
	in, err := Parse([]byte(network))
	if err != nil {
		t.Fatal(err)
	}
	for set, want := range map[string]string{
		"c-ip=10.0.0.1":      "has no placeholder c-ip (it has a-ip, b-ip)",
		"a-ip=eth0":          "not an IP address",
		"a-ip=fe80::1%eth0":  "not an IP address",
		"a-ip=10.0.0.1/99":   "not an IP address",
		"a-ip=10.0.0.1/24/1": "not an IP address",
	} {
		name, v, _ := strings.Cut(set, "=")
		if _, _, err := in.Resolve(map[string]string{name: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: err %v, want %q", set, err, want)
		}
	}
}
