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
				fmt.Fprintf(&b, "    options: {%s}\n", c.pick("miimon: 100", "miimon: 100, updelay: 200", "primary: eth1", "lacp_rate: fast", "xmit_hash_policy: layer2+3", "arp_interval: 100", "downdelay: 100"))
			}
			fmt.Fprintf(&b, "    port: [%s]\n", c.pick("", "eth1", "eth1, eth2", "eth2"))
		case "linux-bridge":
			b.WriteString("  bridge:\n")
			if c.maybe() {
				fmt.Fprintf(&b, "    options: {stp: {enabled: %s}}\n", genBool[c.n(len(genBool))])
			}
			if c.maybe() {
				fmt.Fprintf(&b, "    port: [%s]\n", c.pick("", "{name: eth1}", "{name: eth2}, {name: eth1}"))
			}
		case "vlan":
			fmt.Fprintf(&b, "  vlan: {base-iface: %s, id: %s}\n", c.pick("eth0", "eth1", "bond0"), c.pick("0", "1", "100", "4094", "'7'"))
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
		}
	}
	if c.maybe() {
		fmt.Fprintf(&b, "dns-resolver:\n  config:\n    server: [%s]\n    search: [%s]\n",
			c.pick("", "192.0.2.53", "'2001:db8::53'", "192.0.2.53, '2001:db8::53'", "'2001:db8::53', 192.0.2.53, 192.0.2.54"),
			c.pick("", "example.com", "example.com, example.org"))
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
