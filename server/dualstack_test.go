package server

import (
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/nodereg/nodereg/server/regconfig"
)

func TestDualStackClaims(t *testing.T) {
	cfg, err := regconfig.Parse([]byte(`
registrations:
- name: demo
  token: demo-token
  machineName: m-${System Information/UUID}
  network:
    configurator: nmstate
    ipAddresses: {ip4: v4, ip6: v6}
    config:
      interfaces:
      - name: eth0
        ipv4: {address: [{ip: "{ip4}", prefix-length: 24}]}
        ipv6: {address: [{ip: "{ip6}", prefix-length: 64}]}
pools:
- {name: v4, addresses: [10.0.0.0/24], prefix: 24, gateway: 10.0.0.1}
- {name: v6, addresses: [2001:db8::/64], prefix: 64, gateway: 2001:db8::1, excludedAddresses: [2001:db8::2-2001:db8::9]}
`))
	if err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	s := newServer(t, cfg, memStore(t), func(o *Options) { o.Log = logrus.NewEntry(logger) })

	r := register(t, s, "uuid-a")
	if r.Network == nil || r.Network.IPAddresses["ip4"] != "10.0.0.2" || r.Network.IPAddresses["ip6"] != "2001:db8::a" {
		t.Fatalf("network = %+v", r.Network)
	}
	r = register(t, s, "uuid-b")
	if r.Network.IPAddresses["ip4"] != "10.0.0.3" || r.Network.IPAddresses["ip6"] != "2001:db8::b" {
		t.Fatalf("second machine = %v", r.Network.IPAddresses)
	}
	// The registration log line names the machine and its addresses.
	var line *logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Message == "registered" {
			line = e
		}
	}
	if line == nil || line.Data["addresses"] != "ip4=10.0.0.3,ip6=2001:db8::b" || line.Data["machine"] == "" {
		t.Fatalf("registration log line = %+v", line)
	}
}
