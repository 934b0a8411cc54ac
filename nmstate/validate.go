package nmstate

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

const minIPv6MTU = 1280

// checkName keeps interface names to what the kernel and NetworkManager
// accept and what is safe as a file name and as a keyfile value. nmstate
// itself writes whatever it is given; NetworkManager would not load it.
func checkName(path, name string) error {
	if name == "" || len(name) > maxNameLen || name == "." || name == ".." || strings.HasPrefix(name, ".") {
		return unsupported(path, "interface name %q is not a valid kernel interface name (1 to %d bytes, not starting with a dot)", name, maxNameLen)
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || c == '/' || c == ':' || c == '\\' || c == '%' {
			return unsupported(path, "interface name %q holds %q, which kernel interface names or keyfiles cannot carry", name, c)
		}
	}

	return nil
}

// checkText refuses text that would break or change a keyfile line: control
// characters end or corrupt the line, and GKeyFile reads backslashes as
// escapes, so NetworkManager would read a different value.
func checkText(path, s string) error {
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == '\\' || r == 0xfffd {
			return unsupported(path, "text %q holds %q, which a keyfile value cannot carry unchanged", s, r)
		}
	}
	if strings.TrimSpace(s) != s {
		return unsupported(path, "text %q has leading or trailing spaces, which NetworkManager's keyfile reader drops", s)
	}
	return nil
}

// checkMAC accepts six colon-separated hex octets. nmstate upper-cases any
// text and writes it; NetworkManager rejects a malformed one.
func checkMAC(path, mac string) error {
	parts := strings.Split(mac, ":")
	ok := len(parts) == 6
	for _, p := range parts {
		if len(p) != 2 || !isHex(p[0]) || !isHex(p[1]) {
			ok = false
		}
	}
	if !ok {
		return unsupported(path, "mac-address %q is not six colon-separated hex octets (NetworkManager would reject it)", mac)
	}
	return nil
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// resolve links ports to controllers, adds the port interfaces nmstate's gc
// mode adds (default ethernet, state up) and checks each interface.
func (st *state) resolve() (map[string]*iface, error) {
	byName := map[string]*iface{}
	for _, ifc := range st.ifaces {
		if err := checkName(join(ifc.path, "name"), ifc.name); err != nil {
			return nil, err
		}
		if prev, ok := byName[ifc.name]; ok {
			return nil, unsupported(join(ifc.path, "name"), "interface %q is already defined at %s", ifc.name, prev.path)
		}
		if (ifc.name == "lo") != (ifc.typ == "loopback") && ifc.state != "absent" {
			return nil, unsupported(join(ifc.path, "name"), "only the interface lo, and only as type loopback, is supported for the loopback")
		}
		byName[ifc.name] = ifc
	}
	defined := len(st.ifaces)
	for _, ifc := range st.ifaces {
		if ifc.state != "absent" {
			if err := ifc.checkPortsConfig(); err != nil {
				return nil, err
			}
		}
	}
	for _, ctrl := range st.ifaces[:defined] {
		var ports []string
		var path string
		switch {
		case ctrl.state == "absent":
			continue
		case ctrl.bond != nil:
			ports, path = ctrl.bond.ports, ctrl.bond.portsPath
		case ctrl.br != nil:
			ports, path = ctrl.br.ports, ctrl.br.portsPath
		case ctrl.vrf != nil:
			ports, path = ctrl.vrf.ports, ctrl.vrf.portsPath
		}
		for i, name := range ports {
			p := index(path, i)
			if ctrl.br != nil {
				p = join(p, "name")
			} else if ctrl.bond != nil && ctrl.bond.portsPath == ctrl.bond.portsConfigPath {
				p = join(p, "name")
			}
			if err := checkName(p, name); err != nil {
				return nil, err
			}
			port, ok := byName[name]
			if !ok {
				port = &iface{path: p, name: name, typ: "ethernet", state: "up", autoAdded: true}
				byName[name] = port
				st.ifaces = append(st.ifaces, port)
			}
			switch {
			case port == ctrl:
				return nil, unsupported(p, "interface %q lists itself as a port", name)
			case port.state == "absent":
				return nil, unsupported(p, "port %q is marked absent", name)
			case port.typ == "linux-bridge" || port.typ == "vrf" || (port.typ == "bond" && ctrl.typ != "linux-bridge"):
				return nil, unsupported(p, "port %q is itself a controller; of nested controllers only a bond in a linux-bridge is supported", name)
			case port.controller != nil:
				return nil, unsupported(p, "port %q is already a port of %q", name, port.controller.name)
			}
			port.controller = ctrl
		}
	}
	if err := st.addGenerated(byName, defined); err != nil {
		return nil, err
	}
	for _, ifc := range st.ifaces[:defined] {
		if ifc.state == "absent" {
			continue
		}
		if err := ifc.check(); err != nil {
			return nil, err
		}
		if err := ifc.checkParent(byName); err != nil {
			return nil, err
		}
	}
	return byName, nil
}

func (ifc *iface) check() error {
	if ifc.opts.byMAC && ifc.typ != "ethernet" {
		// NetworkManager matches only ethernet profiles by MAC; any other
		// type without interface-name is refused on load.
		return unsupported(join(ifc.path, "identifier"), "identifier: mac-address on a %s interface: NetworkManager needs interface-name for it", ifc.typ)
	}
	if ifc.mtu != nil && *ifc.mtu > maxU32 {
		return unsupported(join(ifc.path, "mtu"), "mtu %d does not fit NetworkManager's 32-bit mtu", *ifc.mtu)
	}
	if ifc.mac != "" {
		if err := checkMAC(join(ifc.path, "mac-address"), ifc.mac); err != nil {
			return err
		}
	}
	if ifc.desc != nil {
		if err := checkText(join(ifc.path, "description"), *ifc.desc); err != nil {
			return err
		}
	}
	if err := ifc.checkAddrs(); err != nil {
		return err
	}
	if ifc.ipv6 != nil && ifc.ipv6.enabled && ifc.mtu != nil && *ifc.mtu < minIPv6MTU {
		return invalid(join(ifc.path, "mtu"), "MTU should be >= %d when IPv6 is enabled on interface %s, but got mtu: %d", minIPv6MTU, ifc.name, *ifc.mtu)
	}
	if ifc.noIP() {
		for _, ip := range []*ipConf{ifc.ipv4, ifc.ipv6} {
			if ip != nil && ip.enabled {
				p := join(ip.path, "enabled")
				if ifc.state != "up" {
					// nmstate checks only up ports, then writes no IP
					// section for the port: the setting would be lost.
					return unsupported(p, "Interface %s cannot have IP enabled as it is attached to a controller", ifc.name)
				}
				return invalid(p, "Interface %s cannot have IP enabled as it is attached to a controller where IP is not allowed", ifc.name)
			}
		}
	}
	switch ifc.typ {
	case "loopback":
		// gen_conf merges the loopback with its synthetic current state;
		// only a desired lo that already holds those addresses is certain
		// to come out as written.
		for _, want := range []struct {
			ip *ipConf
			a  string
		}{{ifc.ipv4, "127.0.0.1/8"}, {ifc.ipv6, "::1/128"}} {
			if want.ip == nil || !slices.Contains(want.ip.addrStrings(), want.a) {
				return unsupported(ifc.path, "a loopback whose ipv4 and ipv6 do not list 127.0.0.1/8 and ::1/128 (nmstate merges it with lo's current addresses)")
			}
		}
	case "linux-bridge":
		if br := ifc.br; br != nil && br.pvidPath != "" && br.pvid != 1 && !br.filtering() {
			return invalid(br.pvidPath, "Linux bridge %s has vlan-default-pvid different than 1 but VLAN filtering is not enabled.", ifc.name)
		}
	case "bond":
		return ifc.checkBond()
	case "vlan":
		return ifc.checkVlan()
	}
	return nil
}

// checkAddrs checks each address against its section's family, and
// autoconf without DHCP.
func (ifc *iface) checkAddrs() error {
	for _, ip := range []*ipConf{ifc.ipv4, ifc.ipv6} {
		if ip == nil {
			continue
		}
		v6 := ip == ifc.ipv6
		for _, a := range ip.addrs {
			if a.ip.Is6() != v6 {
				fam, sec := "IPv6", "ipv4"
				if v6 {
					fam, sec = "IPv4", "ipv6"
				}
				return invalid(join(a.path, "ip"), "Got %s address %s/%d in %s config section", fam, a.ip, a.prefix, sec)
			}
			if max := uint64(a.ip.BitLen()); a.prefix > max {
				return invalid(join(a.path, "prefix-length"), "Invalid IPv%d network prefix length '%d', should be in the range of 0 to %d", map[bool]int{false: 4, true: 6}[v6], a.prefix, max)
			}
			if a.ip.Is4In6() {
				return unsupported(join(a.path, "ip"), "IPv4-mapped IPv6 address %s is outside the supported subset", a.ip)
			}
		}
		if v6 && ip.enabled && ip.autoconf && !ip.dhcp {
			return &Error{Path: join(ip.path, "autoconf"), Kind: KindNotImplemented, Reason: "Autoconf without DHCP is not supported yet"}
		}
	}
	return nil
}

// filtering: NetworkManager's vlan-filtering, on when a port has a vlan
// block.
func (br *bridgeConf) filtering() bool {
	for _, p := range br.portConf {
		if p.hasVLAN {
			return true
		}
	}
	return false
}

func (ifc *iface) checkBond() error {
	b := ifc.bond
	if b == nil || b.mode == "" {
		p := join(ifc.path, "link-aggregation.mode")
		if ifc.state == "up" {
			return invalid(p, "Bond mode is mandatory for new bond interface: %s", ifc.name)
		}
		return unsupported(p, "a bond without mode is outside the supported subset")
	}
	if b.miimon > 0 && b.arpIntvl > 0 {
		return invalid(b.optsPath, "Bond miimon and arp interval are not compatible options.")
	}
	if _, ok := b.options["arp_ip_target"]; b.arpIntvl > 0 && !ok {
		return unsupported(join(b.optsPath, "arp_interval"), "NetworkManager needs arp_ip_target with arp_interval")
	}
	// NetworkManager's bond setting verification, which nmstate leaves to
	// NetworkManager: refusing here keeps every rendered file loadable.
	if p, ok := b.options["primary"]; ok {
		if p != "" && b.mode != "active-backup" {
			return unsupported(join(b.optsPath, "primary"), "NetworkManager accepts 'primary' only with mode active-backup")
		}
		if p != "" {
			if err := checkName(join(b.optsPath, "primary"), p); err != nil {
				return err
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.options)) {
		if modes, ok := bondOptionModes[k]; ok && !slices.Contains(modes, b.mode) {
			return unsupported(join(b.optsPath, k), "NetworkManager accepts '%s' only with mode %s (it drops it otherwise)", k, strings.Join(modes, ", "))
		}
	}
	return nil
}

// bondOptionModes are the modes NetworkManager keeps a bond option in
// (libnm's bond option table); with any other mode it drops the option on
// load, which nmcli --offline shows.
var bondOptionModes = map[string][]string{
	"lacp_rate": {"802.3ad"}, "ad_actor_sys_prio": {"802.3ad"}, "ad_actor_system": {"802.3ad"},
	"ad_select": {"802.3ad"}, "ad_user_port_key": {"802.3ad"},
	"tlb_dynamic_lb":    {"balance-tlb"},
	"arp_interval":      {"balance-rr", "active-backup", "balance-xor", "broadcast"},
	"arp_ip_target":     {"balance-rr", "active-backup", "balance-xor", "broadcast"},
	"arp_validate":      {"balance-rr", "active-backup", "balance-xor", "broadcast"},
	"arp_all_targets":   {"balance-rr", "active-backup", "balance-xor", "broadcast"},
	"fail_over_mac":     {"active-backup"},
	"num_grat_arp":      {"active-backup"},
	"num_unsol_na":      {"active-backup"},
	"primary_reselect":  {"active-backup", "balance-tlb", "balance-alb"},
	"packets_per_slave": {"balance-rr"},
	"xmit_hash_policy":  {"balance-xor", "802.3ad", "balance-tlb"},
	"lp_interval":       {"balance-tlb", "balance-alb"},
	"resend_igmp":       {"balance-rr", "active-backup", "balance-tlb", "balance-alb"},
}

func (ifc *iface) checkVlan() error {
	v := ifc.vlan
	if v == nil {
		return unsupported(ifc.path, "a vlan interface needs vlan.base-iface and vlan.id")
	}
	if !v.hasBase {
		return invalid(join(v.path, "base-iface"), "Missing 'vlan.base-iface' for interface '%s'", ifc.name)
	}
	if err := checkName(join(v.path, "base-iface"), v.base); err != nil {
		return err
	}
	if v.base == ifc.name {
		return unsupported(join(v.path, "base-iface"), "vlan %q is its own base interface", ifc.name)
	}
	if v.id > 4094 {
		return unsupported(join(v.path, "id"), "vlan id %d is above 4094 (NetworkManager would reject it)", v.id)
	}
	return nil
}

// ipEnabled is nmstate's is_ipv4_enabled/is_ipv6_enabled: the key is given
// and enabled is true.
func (ifc *iface) ipEnabled(v6 bool) bool {
	ip := ifc.ipv4
	if v6 {
		ip = ifc.ipv6
	}
	return ip != nil && ip.enabled
}

func (ip *ipConf) isAuto(v6 bool) bool {
	return ip != nil && ip.enabled && (ip.dhcp || (v6 && ip.autoconf))
}

// staticAddrs are the addresses nmstate keeps: none when disabled, and no
// IPv6 link-local ones.
func (ip *ipConf) staticAddrs() []netip.Addr {
	if ip == nil || !ip.enabled {
		return nil
	}
	var out []netip.Addr
	for _, a := range ip.addrs {
		if a.ip.Is6() && a.ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, a.ip)
	}
	return out
}

func (ip *ipConf) addrStrings() []string {
	if ip == nil || !ip.enabled {
		return nil
	}
	var out []string
	for _, a := range ip.addrs {
		if a.ip.Is6() && a.ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%d", a.ip, a.prefix))
	}
	return out
}

// checkParent is nmstate's orphan check: a VLAN over an interface marked
// absent (other than an ethernet, which absent does not delete) cannot be
// up; a down one would be marked absent too, which is left to nmstate.
func (ifc *iface) checkParent(byName map[string]*iface) error {
	if ifc.vlan == nil {
		return nil
	}
	parent, ok := byName[ifc.vlan.base]
	if !ok || parent.state != "absent" || parent.typ == "ethernet" {
		return nil
	}
	p := join(ifc.vlan.path, "base-iface")
	if ifc.state == "up" {
		return invalid(p, "Interface %s cannot be in up state as its parent %s has been marked as absent", ifc.name, parent.name)
	}
	return unsupported(p, "a down VLAN over the absent %s, which nmstate would mark absent as well", parent.name)
}

// noIP: ports of a bond or bridge carry no IP sections (a VRF port keeps
// its own).
func (ifc *iface) noIP() bool {
	return ifc.controller != nil && ifc.controller.typ != "vrf"
}

// addGenerated adds what gen_conf derives from the defined interfaces: the
// peer profile of a veth (IP disabled) and copy-mac-from's address.
func (st *state) addGenerated(byName map[string]*iface, defined int) error {
	for _, ifc := range st.ifaces[:defined] {
		if ifc.state == "absent" {
			continue
		}
		if ifc.typ == "veth" && ifc.vethPeer != "" {
			p := join(ifc.path, "veth.peer")
			if err := checkName(p, ifc.vethPeer); err != nil {
				return err
			}
			if _, ok := byName[ifc.vethPeer]; ok {
				return unsupported(p, "a veth peer defined in the same state is outside the supported subset")
			}
			peer := &iface{path: p, name: ifc.vethPeer, typ: "veth", state: "up", vethPeer: ifc.name,
				ipv4: &ipConf{}, ipv6: &ipConf{}, generated: true}
			byName[peer.name] = peer
			st.ifaces = append(st.ifaces, peer)
		} else if ifc.typ == "veth" {
			return invalid(ifc.path, "veth interface %s needs veth.peer", ifc.name)
		}
		if ifc.copyMAC != "" {
			src, ok := byName[ifc.copyMAC]
			if !ok || src.mac == "" {
				return invalid(ifc.copyMACPath, "Failed to find mac address of interface %s for copy-mac-from of iface %s", ifc.copyMAC, ifc.name)
			}
			ifc.mac = src.mac
		}
	}
	return nil
}
