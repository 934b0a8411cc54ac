package nmstate

import (
	"errors"
	"strings"
	"testing"
)

type refusal struct {
	name   string
	in     string
	path   string
	kind   string
	reason string // a part of nmstate's message (docs/nmstate.md, Refusals)
}

func checkRefusal(t *testing.T, c refusal) {
	t.Helper()
	kfs, err := GenerateKeyfiles([]byte(c.in))
	if err == nil {
		t.Fatalf("accepted, rendered %v", names(kfs))
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	if e.Path != c.path || e.Kind != c.kind || !strings.Contains(e.Reason, c.reason) {
		t.Fatalf("refused with %q, want path %q, kind %s, reason containing %q", err, c.path, c.kind, c.reason)
	}
	if !strings.Contains(err.Error(), c.path) {
		t.Fatalf("message %q does not name the key path", err)
	}
	if (c.kind == KindUnsupported) != errors.Is(err, ErrUnsupported) {
		t.Fatalf("errors.Is(ErrUnsupported) does not match kind %s", c.kind)
	}
}

const eth0v4 = "interfaces:\n- {name: eth0, type: ethernet, state: up, ipv4: {enabled: true, address: [{ip: 192.0.2.2, prefix-length: 24}]}, ipv6: {enabled: false}}\n"

// TestRefusalsOfNmstate has one case (or more) per refusal docs/nmstate.md
// lists under "Refusals" (inputs nmstate itself refuses), and the VLAN orphan check read
// from nmstate's source (ifaces/inter_ifaces.rs).
func TestRefusalsOfNmstate(t *testing.T) {
	const ia, ni, ns = KindInvalidArgument, KindNotImplemented, KindNotSupported
	for _, c := range []refusal{
		{"address without prefix-length", "interfaces:\n- {name: eth0, ipv4: {enabled: true, address: [{ip: 192.0.2.1}]}}",
			"interfaces[0].ipv4.address[0].prefix-length", ia, "missing field `prefix-length`"},
		{"CIDR in ip", "interfaces:\n- {name: eth0, ipv4: {enabled: true, address: [{ip: 192.0.2.1/24, prefix-length: 24}]}}",
			"interfaces[0].ipv4.address[0].ip", ia, "invalid IP address syntax"},
		{"IPv4 prefix above 32", "interfaces:\n- {name: eth0, ipv4: {enabled: true, address: [{ip: 192.0.2.1, prefix-length: 33}]}}",
			"interfaces[0].ipv4.address[0].prefix-length", ia, "Invalid IPv4 network prefix length '33', should be in the range of 0 to 32"},
		{"IPv6 prefix above 128", "interfaces:\n- {name: eth0, ipv6: {enabled: true, address: [{ip: '2001:db8::1', prefix-length: 129}]}}",
			"interfaces[0].ipv6.address[0].prefix-length", ia, "Invalid IPv6 network prefix length '129', should be in the range of 0 to 128"},
		{"prefix checked even when disabled", "interfaces:\n- {name: eth0, ipv4: {enabled: false, address: [{ip: 192.0.2.1, prefix-length: 40}]}}",
			"interfaces[0].ipv4.address[0].prefix-length", ia, "Invalid IPv4 network prefix length '40'"},
		{"IPv6 address under ipv4", "interfaces:\n- {name: eth0, ipv4: {enabled: true, address: [{ip: '2001:db8::1', prefix-length: 64}]}}",
			"interfaces[0].ipv4.address[0].ip", ia, "Got IPv6 address 2001:db8::1/64 in ipv4 config section"},
		{"IPv4 address under ipv6", "interfaces:\n- {name: eth0, ipv6: {enabled: true, address: [{ip: 192.0.2.1, prefix-length: 24}]}}",
			"interfaces[0].ipv6.address[0].ip", ia, "Got IPv4 address 192.0.2.1/24 in ipv6 config section"},
		{"autoconf under ipv4", "interfaces:\n- {name: eth0, ipv4: {enabled: true, autoconf: true}}",
			"interfaces[0].ipv4.autoconf", ia, "autoconf is not allowed for IPv4"},
		{"autoconf without dhcp", "interfaces:\n- {name: eth0, ipv6: {enabled: true, autoconf: true, dhcp: false}}",
			"interfaces[0].ipv6.autoconf", ni, "Autoconf without DHCP is not supported yet"},
		{"unknown key", "interfaces:\n- {name: eth0, foo: 1}",
			"interfaces[0].foo", ia, "unknown field `foo`"},
		{"unknown key in ipv4", "interfaces:\n- {name: eth0, ipv4: {enabled: true, foo: 1}}",
			"interfaces[0].ipv4.foo", ia, "unknown field `foo`"},
		{"unknown key in an address", "interfaces:\n- {name: eth0, ipv4: {enabled: true, address: [{ip: 192.0.2.1, prefix-length: 24, foo: 1}]}}",
			"interfaces[0].ipv4.address[0].foo", ia, "unknown field `foo`"},
		{"unknown key in a route", "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, foo: 1}",
			"routes.config[0].foo", ia, "unknown field `foo`"},
		{"unknown top-level key", "foo: 1", "foo", ia, "unknown field `foo`"},
		{"bad state", "interfaces:\n- {name: eth0, state: foo}",
			"interfaces[0].state", ia, "unknown variant `foo`, expected one of `up`, `down`, `absent`, `unknown`, `ignore`"},
		{"mtu below 1280 with IPv6", "interfaces:\n- {name: eth0, mtu: 1000, ipv6: {enabled: true}}",
			"interfaces[0].mtu", ia, "MTU should be >= 1280 when IPv6 is enabled on interface eth0, but got mtu: 1000"},
		{"IP enabled on a bond port", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: active-backup, port: [eth1]}}\n- {name: eth1, ipv4: {enabled: true, dhcp: true}}",
			"interfaces[1].ipv4.enabled", ia, "Interface eth1 cannot have IP enabled as it is attached to a controller where IP is not allowed"},
		{"IP enabled on a bridge port", "interfaces:\n- {name: br0, type: linux-bridge, bridge: {port: [{name: eth1}]}}\n- {name: eth1, ipv6: {enabled: true}}",
			"interfaces[1].ipv6.enabled", ia, "cannot have IP enabled as it is attached to a controller"},
		{"new bond without mode", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {port: [eth1]}}",
			"interfaces[0].link-aggregation.mode", ia, "Bond mode is mandatory for new bond interface: bond0"},
		{"bond without link-aggregation", "interfaces:\n- {name: bond0, type: bond}",
			"interfaces[0].link-aggregation.mode", ia, "Bond mode is mandatory for new bond interface: bond0"},
		{"miimon with arp_interval", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: balance-rr, options: {miimon: 100, arp_interval: 100}}}",
			"interfaces[0].link-aggregation.options", ia, "Bond miimon and arp interval are not compatible options."},
		{"vlan without base-iface", "interfaces:\n- {name: v100, type: vlan, vlan: {id: 100}}",
			"interfaces[0].vlan.base-iface", ia, "Missing 'vlan.base-iface' for interface 'v100'"},
		{"vlan without id", "interfaces:\n- {name: v100, type: vlan, vlan: {base-iface: eth0}}",
			"interfaces[0].vlan.id", ia, "missing field `id`"},
		{"vlan over an absent parent", "interfaces:\n- {name: v1, type: vlan, vlan: {base-iface: bond0, id: 1}}\n- {name: bond0, type: bond, state: absent}",
			"interfaces[0].vlan.base-iface", ia, "Interface v1 cannot be in up state as its parent bond0 has been marked as absent"},
		{"route without next-hop-interface", eth0v4 + "routes:\n  config:\n  - {destination: 198.51.100.0/24, next-hop-address: 192.0.2.1}",
			"routes.config[0].next-hop-interface", ni, "Route with empty next hop interface is not supported"},
		{"route via IPv6-disabled interface", eth0v4 + "routes:\n  config:\n  - {destination: '::/0', next-hop-interface: eth0, next-hop-address: '2001:db8::1'}",
			"routes.config[0].next-hop-interface", ia, "The next hop interface of desired Route 'destination: ::/0 next-hop-interface: eth0 next-hop-address: 2001:db8::1' has been marked as IPv6 disabled"},
		{"route via interface without ipv4 key", "interfaces:\n- {name: eth0}\nroutes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0}",
			"routes.config[0].next-hop-interface", ia, "has been marked as IPv4 disabled"},
		{"route via port", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, port: [eth1]}}\nroutes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth1}",
			"routes.config[0].next-hop-interface", ia, "has been marked as IPv4 disabled"},
		{"route via absent interface", eth0v4 + "- {name: eth1, state: absent}\nroutes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth1}",
			"routes.config[0].next-hop-interface", ia, "has been marked as absent"},
		{"route into 0.0.0.0/8", eth0v4 + "routes:\n  config:\n  - {destination: 0.1.0.0/16, next-hop-interface: eth0}",
			"routes.config[0].destination", ia, "0.0.0.0/8 and its subnet cannot be used as the route destination for unicast route, please use the default gateway 0.0.0.0/0 instead"},
		{"route to 0.0.0.0 without prefix", eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0, next-hop-interface: eth0}",
			"routes.config[0].destination", ia, "0.0.0.0/8 and its subnet cannot be used"},
		{"route weight 0", eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, weight: 0}",
			"routes.config[0].weight", ia, "Invalid ECMP route weight 0, should be in the range of 1 to 256"},
		{"route weight 257", eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, weight: 257}",
			"routes.config[0].weight", ia, "Invalid ECMP route weight 257"},
		{"IPv6 route with weight", eth0v4 + "routes:\n  config:\n  - {destination: '::/0', next-hop-interface: eth0, weight: 5}",
			"routes.config[0].weight", ns, "IPv6 ECMP route with weight is not supported yet"},
		{"no interface for DNS servers", "interfaces:\n- {name: eth0, ipv4: {enabled: true}}\ndns-resolver:\n  config: {server: [192.0.2.53]}",
			"dns-resolver.config.server", ia, `Failed to find suitable(IP enabled) interface for DNS server ["192.0.2.53"]`},
		{"no interface for IPv6 DNS server", eth0v4 + "dns-resolver:\n  config: {server: [192.0.2.53, '2001:db8::53']}",
			"dns-resolver.config.server", ia, `Failed to find suitable(IP enabled) interface for DNS server ["2001:db8::53"]`},
		{"search only, no IP-enabled interface", "interfaces:\n- {name: eth0, ipv4: {enabled: false}}\ndns-resolver:\n  config: {search: [example.com]}",
			"dns-resolver.config.search", ia, "Failed to find suitable(IP enabled) interface for DNS searches 'example.com'"},
		{"servers v4 v6 v4", eth0v4 + "dns-resolver:\n  config: {server: [192.0.2.53, '2001:db8::53', 192.0.2.54]}",
			"dns-resolver.config.server", ni, "Placing IPv4/IPv6 nameserver in the middle of IPv6/IPv4 nameservers is not supported yet"},
		{"servers v6 v4 v6", eth0v4 + "dns-resolver:\n  config: {server: ['2001:db8::53', 192.0.2.53, '2001:db8::54']}",
			"dns-resolver.config.server", ni, "Placing IPv4/IPv6 nameserver in the middle"},
		{"non-IP DNS server", eth0v4 + "dns-resolver:\n  config: {server: [dns.example.com]}",
			"dns-resolver.config.server[0]", ia, "Invalid DNS server string dns.example.com"},
		{"unknown DNS option", eth0v4 + "dns-resolver:\n  config: {server: [192.0.2.53], options: [edns1]}",
			"dns-resolver.config.options[0]", ia, "Unsupported DNS option edns1"},
		{"rule without family or address", eth0v4 + "route-rules:\n  config:\n  - {fwmark: 1, route-table: 100}",
			"route-rules.config[0]", ia, "Neither ip-from, ip-to nor family is defined"},
		{"rule iif not in the file", eth0v4 + "route-rules:\n  config:\n  - {ip-to: 198.51.100.0/24, iif: eth9, route-table: 100}",
			"route-rules.config[0].iif", ia, "required by route rule does not exists"},
	} {
		t.Run(c.name, func(t *testing.T) { checkRefusal(t, c) })
	}
}

// TestRefusalsOutsideSubset: what nmstate may accept but this translator
// does not cover, or what nmstate writes and NetworkManager would not load
// as written. Each is refused as Unsupported, never rendered differently.
func TestRefusalsOutsideSubset(t *testing.T) {
	const un = KindUnsupported
	for _, c := range []refusal{
		{"other interface type", "interfaces:\n- {name: ovs0, type: ovs-bridge}", "interfaces[0].type", un, "outside the supported subset"},
		{"unknown interface type", "interfaces:\n- {name: x0, type: foo}", "interfaces[0].type", un, "unknown interface type"},
		{"state ignore", "interfaces:\n- {name: eth0, state: ignore}", "interfaces[0].state", un, "outside the supported subset"},
		{"known nmstate key outside the subset", "interfaces:\n- {name: eth0, 802.1x: {}}", "interfaces[0].802.1x", un, "outside the supported subset"},
		{"ethtool features", "interfaces:\n- {name: eth0, ethtool: {feature: {rx-gro: true}}}", "interfaces[0].ethtool.feature", un, "outside the supported subset"},
		{"mac-vlan before its keys", "interfaces:\n- {name: mv0, type: mac-vlan, mac-vlan: {base-iface: eth0, mode: bridge}}", "interfaces[0].type", un, "outside the supported subset"},
		{"ovs-interface with patch", "interfaces:\n- {name: p0, type: ovs-interface, patch: {peer: p1}}", "interfaces[0].type", un, "outside the supported subset"},
		{"ovs-interface with dpdk", "interfaces:\n- {name: d0, type: ovs-interface, dpdk: {devargs: x}}", "interfaces[0].type", un, "outside the supported subset"},
		{"ipsec", "interfaces:\n- {name: hosta_conn, type: ipsec, libreswan: {right: 192.0.2.1}}", "interfaces[0].type", un, "outside the supported subset"},
		{"libreswan on ethernet", "interfaces:\n- {name: eth0, libreswan: {}}", "interfaces[0].libreswan", un, "outside the supported subset"},
		{"IP option outside the subset", "interfaces:\n- {name: eth0, ipv4: {enabled: true, dhcp: true, allow-extra-address: true}}", "interfaces[0].ipv4.allow-extra-address", un, "outside the supported subset"},
		{"DUID NetworkManager refuses", "interfaces:\n- {name: eth0, ipv6: {enabled: true, dhcp: true, autoconf: true, dhcp-duid: uuid}}", "interfaces[0].ipv6.dhcp-duid", un, "NetworkManager refuses"},
		{"main-table rule with two routed interfaces", eth0v4 + "- {name: eth1, ipv4: {enabled: true, address: [{ip: 198.51.100.2, prefix-length: 24}]}}\nroutes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0}\n  - {destination: 203.0.113.0/24, next-hop-interface: eth1}\nroute-rules:\n  config:\n  - {ip-from: 192.0.2.0/24}", "route-rules.config[0]", un, "at random"},
		{"route source of the other family", eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, source: '2001:db8::2'}", "routes.config[0].source", un, "address family"},
		{"two profiles under one name", "interfaces:\n- {name: eth0, profile-name: uplink}\n- {name: eth1, profile-name: uplink}", "interfaces[1].profile-name", un, "also the profile of eth0"},
		{"loopback without its addresses", "interfaces:\n- {name: lo, type: loopback, ipv4: {enabled: true, address: [{ip: 198.51.100.1, prefix-length: 32}]}}", "interfaces[0]", un, "127.0.0.1/8"},
		{"profile-name with a slash", "interfaces:\n- {name: eth0, profile-name: a/b}", "interfaces[0].profile-name", un, "keyfile name"},
		{"scoped DNS server", eth0v4 + "dns-resolver:\n  config: {server: ['fe80::1%eth0']}", "dns-resolver.config.server[0]", un, "link-local DNS servers"},
		{"bad search domain", eth0v4 + "dns-resolver:\n  config: {server: [192.0.2.53], search: ['a;b']}", "dns-resolver.config.search[0]", un, "search domain"},
		{"bond option outside the subset", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, options: {ns_ip6_target: '2001:db8::1'}}}", "interfaces[0].link-aggregation.options.ns_ip6_target", un, "outside the supported subset"},
		{"bond ports-config naming other ports", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, port: [eth1, eth2], ports-config: [{name: eth1, priority: 2}]}}", "interfaces[0].link-aggregation.ports-config", KindInvalidArgument, "conflict with the port names"},
		{"bridge port vlan without tags", "interfaces:\n- {name: br0, type: linux-bridge, bridge: {port: [{name: eth1, vlan: {}}]}}", "interfaces[0].bridge.port[0].vlan", un, "only an access port with a tag"},
		{"link-aggregation on ethernet", "interfaces:\n- {name: eth0, link-aggregation: {mode: 1}}", "interfaces[0].link-aggregation", un, "only read for type bond"},
		{"bridge in a bond", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, port: [br0]}}\n- {name: br0, type: linux-bridge}", "interfaces[0].link-aggregation.port[0]", un, "only a bond in a linux-bridge"},
		{"port of two controllers", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, port: [eth1]}}\n- {name: bond1, type: bond, link-aggregation: {mode: 1, port: [eth1]}}", "interfaces[1].link-aggregation.port[0]", un, "already a port of"},
		{"absent port", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, port: [eth1]}}\n- {name: eth1, state: absent}", "interfaces[0].link-aggregation.port[0]", un, "marked absent"},
		{"duplicate interface", "interfaces:\n- {name: eth0}\n- {name: eth0, type: dummy}", "interfaces[1].name", un, "already defined"},
		{"name too long", "interfaces:\n- {name: abcdefghijklmnop}", "interfaces[0].name", un, "not a valid kernel interface name"},
		{"name with a slash", "interfaces:\n- {name: ../../etc}", "interfaces[0].name", un, "not a valid kernel interface name"},
		{"name with a newline", "interfaces:\n- {name: \"a\\nb\"}", "interfaces[0].name", un, "cannot carry"},
		{"loopback", "interfaces:\n- {name: lo}", "interfaces[0].name", un, "loopback"},
		{"malformed MAC", "interfaces:\n- {name: eth0, mac-address: zz}", "interfaces[0].mac-address", un, "six colon-separated hex octets"},
		{"description with a newline", "interfaces:\n- {name: eth0, description: \"a\\n[ipv4]\"}", "interfaces[0].description", un, "cannot carry"},
		{"mtu above 32 bits", "interfaces:\n- {name: eth0, mtu: 4294967296}", "interfaces[0].mtu", un, "32-bit"},
		{"vlan id above 4094", "interfaces:\n- {name: v1, type: vlan, vlan: {base-iface: eth0, id: 4095}}", "interfaces[0].vlan.id", un, "above 4094"},
		{"metric below -1", eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, metric: -2}", "routes.config[0].metric", un, "metric -2"},
		{"IPv6 next hop on IPv4 route", eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, next-hop-address: '2001:db8::1'}", "routes.config[0].next-hop-address", un, "address family"},
		{"route without destination", eth0v4 + "routes:\n  config:\n  - {next-hop-interface: eth0}", "routes.config[0].destination", un, "without destination"},
		{"routes without address or DHCP", "interfaces:\n- {name: eth0, ipv4: {enabled: true}}\nroutes:\n  config:\n  - {destination: 198.51.100.0/24, next-hop-interface: eth0}", "interfaces[0].ipv4", un, "method=manual without addresses"},
		{"search domains on a disabled section", "interfaces:\n- {name: eth0, ipv4: {enabled: true}}\ndns-resolver:\n  config: {search: [example.com]}", "dns-resolver.config.search", un, "method is disabled"},
		{"search domains on a link-local section", "interfaces:\n- {name: eth0, ipv6: {enabled: true}}\ndns-resolver:\n  config: {search: [example.com]}", "dns-resolver.config.search", un, "method is link-local"},
		{"arp_interval", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, options: {arp_interval: 100}}}", "interfaces[0].link-aggregation.options.arp_interval", un, "arp_ip_target"},
		{"lacp_rate outside 802.3ad", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: balance-xor, options: {lacp_rate: fast}}}", "interfaces[0].link-aggregation.options.lacp_rate", un, "802.3ad"},
		{"primary outside active-backup", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: balance-rr, options: {primary: eth1}}}", "interfaces[0].link-aggregation.options.primary", un, "active-backup"},
		{"YAML alias", "interfaces:\n- &a {name: eth0}\n- *a", "interfaces[1]", un, "aliases"},
		{"custom YAML tag", "interfaces:\n- !foo {name: eth0}", "interfaces[0]", un, "tag"},
		{"two documents", "interfaces: []\n---\ninterfaces: []\n", "", un, "more than one YAML document"},
		{"too many interfaces", "interfaces:\n" + strings.Repeat("- {name: eth0}\n", MaxInterfaces+1), "interfaces", un, "more than 256 entries"},
		{"too large", "interfaces: []\n" + strings.Repeat("#", MaxInputBytes), "", un, "larger than"},
	} {
		t.Run(c.name, func(t *testing.T) { checkRefusal(t, c) })
	}
}
