package nmstate

import (
	"fmt"
	"slices"
	"strings"
)

// choices turns fuzz bytes into decisions, so the fuzzer can explore the
// space of well-formed desired states (most raw byte strings are not YAML).
type choices struct {
	b []byte
	i int
}

func (c *choices) n(max int) int {
	if c.i >= len(c.b) || max <= 1 {
		c.i++
		return 0
	}
	v := int(c.b[c.i]) % max
	c.i++
	return v
}

func (c *choices) pick(opts ...string) string { return opts[c.n(len(opts))] }

func (c *choices) maybe() bool { return c.n(2) == 1 }

var (
	genNames = []string{"eth0", "eth1", "eth2", "enp1s0", "bond0", "br0", "dummy0", "eth0.100", "v5"}
	genV4    = []string{"192.0.2.1", "192.0.2.10", "198.51.100.7", "10.0.0.5", "0.0.0.0", "255.255.255.255", "224.0.0.1", "127.0.0.1", "169.254.1.1"}
	genV6    = []string{"2001:db8::1", "2001:DB8:0:0::0002", "fe80::1", "::", "::1", "ff02::1", "fd00::5", "2001:db8:1::"}
	// The last prefix of each pool is invalid; it is drawn rarely.
	genPrefix4 = []string{"0", "1", "8", "24", "'24'", "31", "32", "24", "16", "33"}
	genPrefix6 = []string{"0", "1", "48", "64", "'64'", "127", "128", "64", "56", "129"}
	genMetric  = []string{"-1", "0", "100", "'150'", "4294967295", "-2"}
	genTable   = []string{"0", "100", "254", "4294967295", "'254'"}
	genMTU     = []string{"0", "68", "576", "1279", "1280", "1500", "9000", "65536", "'9000'"}
	genBool    = []string{"true", "false", "yes", "'no'", "1", "0", "On"}
)

// genState builds a desired state from fuzz bytes: interfaces of every
// supported type, addresses, routes and DNS, with edge values in the pools.
func genState(data []byte) string {
	c := &choices{b: data}
	var b strings.Builder
	nIf := 1 + c.n(4)
	var ifNames []string
	b.WriteString("interfaces:\n")
	for i := 0; i < nIf; i++ {
		// Mostly distinct names: a repeated name is refused early.
		name := genNames[(i*3+c.n(len(genNames)))%len(genNames)]
		if c.n(8) != 0 {
			for slices.Contains(ifNames, name) {
				name = genNames[(slicesIndex(genNames, name)+1)%len(genNames)]
			}
		}
		ifNames = append(ifNames, name)
		typ := c.pick("ethernet", "bond", "linux-bridge", "vlan", "dummy", "")
		fmt.Fprintf(&b, "- name: %s\n", name)
		if typ != "" {
			fmt.Fprintf(&b, "  type: %s\n", typ)
		}
		if c.maybe() {
			fmt.Fprintf(&b, "  state: %s\n", c.pick("up", "down", "absent"))
		}
		if c.n(3) == 0 {
			fmt.Fprintf(&b, "  mtu: %s\n", genMTU[c.n(len(genMTU))])
		}
		if c.n(4) == 0 {
			fmt.Fprintf(&b, "  mac-address: '%s'\n", c.pick("52:54:00:ab:cd:ef", "02:00:00:00:00:01", "00:00:00:00:00:00", "FF:FF:FF:FF:FF:FF"))
		}
		if c.n(4) == 0 {
			fmt.Fprintf(&b, "  description: '%s'\n", c.pick("uplink port", "", "Main-NIC", "a=b [x] ;#"))
		}
		genIfaceOpts(c, &b, name)
		for _, fam := range []string{"ipv4", "ipv6"} {
			if c.n(4) == 0 {
				continue
			}
			fmt.Fprintf(&b, "  %s:\n    enabled: %s\n", fam, genBool[c.n(len(genBool))])
			if c.maybe() {
				fmt.Fprintf(&b, "    dhcp: %s\n", genBool[c.n(len(genBool))])
			}
			if fam == "ipv6" && c.n(4) == 0 {
				fmt.Fprintf(&b, "    autoconf: %s\n", genBool[c.n(len(genBool))])
			}
			genIPOpts(c, &b, fam)
			if n := c.n(4); n > 0 {
				b.WriteString("    address:\n")
				for j := 0; j < n; j++ {
					pool, prefixes := genV4, genPrefix4
					if fam == "ipv6" {
						pool, prefixes = genV6, genPrefix6
					}
					fmt.Fprintf(&b, "    - {ip: '%s', prefix-length: %s}\n", pool[c.n(len(pool))], prefixes[c.n(len(prefixes)-1)+c.n(16)/15])
				}
			}
		}
		switch typ {
		case "bond":
			fmt.Fprintf(&b, "  link-aggregation:\n    mode: %s\n", c.pick("active-backup", "balance-rr", "802.3ad", "balance-xor", "4", "balance-alb", "broadcast"))
			if c.maybe() {
				fmt.Fprintf(&b, "    options: {%s}\n", c.pick("miimon: 100", "miimon: 100, updelay: 200", "primary: eth1", "lacp_rate: fast", "xmit_hash_policy: layer2+3", "arp_interval: 100", "downdelay: 100",
					"miimon: 100, primary_reselect: better", "fail_over_mac: 2", "arp_interval: 500, arp_ip_target: '192.0.2.1,192.0.2.2', arp_validate: all, arp_all_targets: any",
					"ad_select: count, min_links: 1", "all_slaves_active: delivered", "resend_igmp: 2, num_grat_arp: 3", "tlb_dynamic_lb: false", "ad_actor_system: '02:00:00:00:00:0a', ad_actor_sys_prio: 10",
					"packets_per_slave: 4", "use_carrier: true", "lp_interval: 2, peer_notif_delay: 100"))
			}
			if c.n(3) == 0 {
				b.WriteString("    ports-config: [{name: eth1, queue-id: 3}, {name: eth2, priority: 5}]\n")
				if c.maybe() {
					break
				}
			}
			fmt.Fprintf(&b, "    port: [%s]\n", c.pick("", "eth1", "eth1, eth2", "eth2"))
		case "linux-bridge":
			b.WriteString("  bridge:\n")
			if c.maybe() {
				fmt.Fprintf(&b, "    options: {stp: {enabled: %s%s}%s}\n", genBool[c.n(len(genBool))],
					c.pick("", ", forward-delay: 10, hello-time: 3", ", max-age: 25, priority: 4096"),
					c.pick("", ", mac-ageing-time: 600", ", group-fwd-mask: 8", ", hash-max: 1024, multicast-snooping: false", ", multicast-router: 2, multicast-querier: true",
						", vlan-protocol: 802.1ad", ", vlan-default-pvid: 10", ", multicast-query-interval: 12000, multicast-startup-query-count: 3"))
			}
			if c.maybe() {
				fmt.Fprintf(&b, "    %s: [%s]\n", c.pick("port", "ports"), c.pick("", "{name: eth1}", "{name: eth2}, {name: eth1}", "{name: eth1, stp-priority: 40, stp-path-cost: 200, stp-hairpin-mode: true}",
					"{name: eth1, vlan: {mode: access, tag: 30}}", "{name: eth1, vlan: {mode: trunk, enable-native: true, tag: 10, trunk-tags: [{id: 101}, {id-range: {min: 200, max: 299}}]}}",
					"{name: bond0}"))
			}
		case "vlan":
			fmt.Fprintf(&b, "  vlan: {base-iface: %s, id: %s%s}\n", c.pick("eth0", "eth1", "bond0"), c.pick("0", "1", "100", "4094", "'7'"),
				c.pick("", ", reorder-headers: false", ", loose-binding: true", ", registration-protocol: mvrp", ", protocol: 802.1ad", ", registration-protocol: gvrp"))
		}
	}
	if c.maybe() {
		b.WriteString("routes:\n  config:\n")
		for j, n := 0, 1+c.n(5); j < n; j++ {
			v6 := c.maybe()
			dst := c.pick("0.0.0.0/0", "198.51.100.0/24", "203.0.113.5", "192.0.2.77/24", "10.0.0.0/8")
			via := c.pick("192.0.2.1", "10.0.0.1", "")
			if v6 {
				dst = c.pick("::/0", "2001:db8:5::/48", "2001:db8::9", "fd00::/8")
				via = c.pick("2001:db8::1", "fe80::1", "")
			}
			fmt.Fprintf(&b, "  - destination: '%s'\n    next-hop-interface: %s\n", dst, ifNames[c.n(len(ifNames))])
			if via != "" {
				fmt.Fprintf(&b, "    next-hop-address: '%s'\n", via)
			}
			if c.maybe() {
				fmt.Fprintf(&b, "    metric: %s\n", genMetric[c.n(len(genMetric))])
			}
			if c.maybe() {
				fmt.Fprintf(&b, "    table-id: %s\n", genTable[c.n(len(genTable))])
			}
			if c.n(4) == 0 {
				fmt.Fprintf(&b, "    weight: %s\n", c.pick("1", "256", "10"))
			}
			if c.n(4) == 0 {
				fmt.Fprintf(&b, "    %s\n", c.pick("cwnd: 20", "source: 192.0.2.10", "source: '2001:db8::10'"))
			}
		}
		if c.n(4) == 0 {
			fmt.Fprintf(&b, "  - {destination: '%s', route-type: %s}\n", c.pick("198.51.100.192/28", "2001:db8:9::/48"), c.pick("blackhole", "prohibit", "unreachable"))
		}
	}
	if c.n(3) == 0 {
		b.WriteString("route-rules:\n  config:\n")
		for j, n := 0, 1+c.n(3); j < n; j++ {
			fmt.Fprintf(&b, "  - {%s%s%s}\n", c.pick("ip-from: 192.0.2.0/24", "ip-to: '2001:db8:7::/48'", "family: ipv4, fwmark: 32, fwmask: 240", "ip-to: 198.51.100.130/26, ip-from: 192.0.2.7", "family: ipv6"),
				c.pick("", ", priority: 3000", ", priority: 31000"),
				c.pick("", ", route-table: 100", ", action: blackhole", ", route-table: 254, suppress-prefix-length: 0", ", iif: "+ifNames[c.n(len(ifNames))]))
		}
	}
	if c.maybe() {
		fmt.Fprintf(&b, "dns-resolver:\n  config:\n    server: [%s]\n    search: [%s]\n    options: [%s]\n",
			c.pick("", "192.0.2.53", "'2001:db8::53'", "192.0.2.53, '2001:db8::53'", "'2001:db8::53', 192.0.2.53, 192.0.2.54"),
			c.pick("", "example.com", "example.com, example.org"),
			c.pick("", "", "rotate", "'ndots:2', 'timeout:1', 'attempts:3'", "edns0, trust-ad", "edns1"))
	}
	return b.String()
}

func slicesIndex(l []string, s string) int {
	for i, x := range l {
		if x == s {
			return i
		}
	}
	return -1
}

// genIfaceOpts adds the interface-level options of docs/nmstate.md.
func genIfaceOpts(c *choices, b *strings.Builder, name string) {
	if c.n(6) == 0 {
		fmt.Fprintf(b, "  profile-name: %s\n", c.pick("uplink", name+"-p", "a b", "x/y"))
	}
	if c.n(6) == 0 {
		fmt.Fprintf(b, "  identifier: %s\n", c.pick("mac-address", "name"))
	}
	if c.n(6) == 0 {
		fmt.Fprintf(b, "  wait-ip: %s\n", c.pick("any", "ipv4", "ipv6", "ipv4+ipv6"))
	}
	if c.n(8) == 0 {
		fmt.Fprintf(b, "  lldp: {enabled: %s}\n", c.pick("true", "false"))
	}
	if c.n(8) == 0 {
		fmt.Fprintf(b, "  accept-all-mac-addresses: %s\n", c.pick("true", "false"))
	}
	if c.n(8) == 0 {
		fmt.Fprintf(b, "  ethernet: {%s}\n", c.pick("auto-negotiation: false, speed: 10000, duplex: full", "auto-negotiation: true", "sr-iov: {total-vfs: 4}", "speed: 1000, duplex: half"))
	}
	if c.n(8) == 0 {
		fmt.Fprintf(b, "  ethtool: {%s}\n", c.pick("pause: {autoneg: false, rx: true, tx: false}", "ring: {rx: 4096, tx: 4096}", "ring: {rx-jumbo: 1024, rx-mini: 256}"))
	}
	if c.n(10) == 0 {
		fmt.Fprintf(b, "  mptcp: {address-flags: [%s]}\n", c.pick("", "subflow, backup", "signal", "fullmesh"))
	}
}

// genIPOpts adds DHCP/autoconf and addressing options to an ipv4/ipv6 block.
func genIPOpts(c *choices, b *strings.Builder, fam string) {
	for range c.n(4) {
		switch c.n(9) {
		case 0:
			fmt.Fprintf(b, "    auto-dns: %s\n", genBool[c.n(len(genBool))])
		case 1:
			fmt.Fprintf(b, "    auto-routes: %s\n", genBool[c.n(len(genBool))])
		case 2:
			fmt.Fprintf(b, "    auto-gateway: %s\n", genBool[c.n(len(genBool))])
		case 3:
			fmt.Fprintf(b, "    auto-route-table-id: %s\n", c.pick("150", "254", "0"))
		case 4:
			fmt.Fprintf(b, "    auto-route-metric: %s\n", c.pick("250", "0"))
		case 5:
			fmt.Fprintf(b, "    dhcp-send-hostname: %s\n", genBool[c.n(len(genBool))])
		case 6:
			fmt.Fprintf(b, "    dhcp-custom-hostname: %s\n", c.pick("edge-07.example.net", "edge07"))
		case 7:
			if fam == "ipv4" {
				fmt.Fprintf(b, "    dhcp-client-id: %s\n", c.pick("ll", "iaid+duid", "none", "'01:52:54:00:c0:ff:ee'", "stable"))
			} else {
				fmt.Fprintf(b, "    dhcp-duid: %s\n", c.pick("ll", "llt", "'00:03:00:01:52:54:00:c0:ff:ee'", "stable-uuid", "uuid"))
			}
		case 8:
			if fam == "ipv6" {
				fmt.Fprintf(b, "    %s\n", c.pick("addr-gen-mode: stable-privacy", "addr-gen-mode: eui64", "token: '::a1:b2:c3:d4'"))
			}
		}
	}
}
