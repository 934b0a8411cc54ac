package nmstate

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Bounds on what an (untrusted) desired state may hold. They are far above
// what a node's network needs and keep the work per input small.
const (
	MaxInputBytes      = 1 << 20
	MaxInterfaces      = 256
	MaxAddresses       = 256 // per interface and family
	MaxRoutes          = 1024
	MaxPorts           = 64 // per bond or bridge
	MaxDNSServers      = 16
	MaxDNSSearches     = 64
	maxNameLen         = 15 // kernel IFNAMSIZ-1
	maxDescriptionLen  = 1024
	maxTextLen         = 256
	maxDNSSearchLength = 253
)

// The data model: what survives parsing, in document order.

type state struct {
	ifaces []*iface
	routes []*route
	rules  []*rule
	dns    *dnsConfig // nil: no dns-resolver.config
}

type iface struct {
	path  string
	name  string
	typ   string // nmstate type: ethernet, bond, linux-bridge, vlan, dummy
	state string // up, down, absent
	mtu   *uint64
	mac   string // upper-cased; "" when not set
	desc  *string
	ipv4  *ipConf // nil: key missing
	ipv6  *ipConf
	bond  *bondConf
	br    *bridgeConf
	vlan  *vlanConf

	opts  ifaceOpts
	vrf   *vrfConf
	vxlan *vxlanConf
	ib    *ibConf

	vethPeer    string
	uuidType    string // nmstate's type in the uuid when it differs from typ
	copyMAC     string
	copyMACPath string

	autoAdded  bool   // named only in a port list
	generated  bool   // a veth peer gen_conf adds
	controller *iface // set for bond and bridge ports
}

type ipConf struct {
	path     string
	enabled  bool
	dhcp     bool
	autoconf bool
	addrs    []ipAddr
	opts     ipOpts
}

type ipAddr struct {
	path   string
	ip     netip.Addr
	prefix uint64
}

type bondConf struct {
	path      string
	mode      string            // kernel name, "" when not given
	options   map[string]string // kernel option name -> keyfile value
	miimon    uint64
	arpIntvl  uint64
	optsPath  string
	ports     []string
	portsPath string

	portsConfig     []bondPort
	portsConfigPath string
}

type bridgeConf struct {
	path       string
	stp        *bool
	options    map[string]string // [bridge] key -> value, besides stp
	pvid       uint64
	pvidPath   string
	portsGiven bool
	ports      []string
	portConf   []bridgePort
	portsPath  string
}

type vlanConf struct {
	path     string
	base     string
	hasBase  bool
	id       uint64
	protocol string
	flags    uint64 // NetworkManager's vlan.flags bitmask
}

type route struct {
	path     string
	absent   bool
	dest     string // as written; sanitised later
	hasDest  bool
	iface    string
	hasIface bool
	via      string
	hasVia   bool
	metric   *int64
	table    *uint64
	weight   *uint64
	typ      string // route-type
	cwnd     *uint64
	source   string
}

type dnsConfig struct {
	path     string
	servers  []string
	srvPaths []string
	search   []string
	options  []string
}

// nmstate keys we know but do not translate: named so a refusal says
// "outside the subset" rather than "unknown field".
var (
	otherTopKeys   = []string{"hostname", "ovs-db", "ovn", "dispatch", "description"}
	otherIfaceKeys = []string{"driver", "permanent-mac-address", "min-mtu", "max-mtu",
		"controller", "ovs-db", "802.1x",
		"dispatch", "sriov", "bridge", "link-aggregation", "vlan", "mac-vlan",
		"mac-vtap", "ipvlan", "macsec", "hsr", "team", "loopback", "libreswan", "patch", "dpdk"}
	otherIPKeys    = []string{"allow-extra-address"}
	supportedTypes = []string{"ethernet", "bond", "linux-bridge", "vlan", "dummy", "loopback", "vrf", "vxlan", "veth", "infiniband"}
	otherTypes     = []string{"ovs-bridge", "ovs-interface", "team", "mac-vlan", "mac-vtap",
		"macsec", "ipsec", "hsr", "ipvlan", "xfrm", "unknown", "other", "tun"}
)

// parse reads the desired state. It checks shapes and syntax (what nmstate's
// deserialiser checks); meaning is checked by validate.
func parse(desired []byte) (*state, error) {
	if len(desired) > MaxInputBytes {
		return nil, unsupported("", "desired state larger than %d bytes", MaxInputBytes)
	}
	// nmstatectl replaces no-break spaces before parsing (cli/state.rs).
	desired = bytes.ReplaceAll(desired, []byte("\u00a0"), []byte(" "))
	dec := yaml.NewDecoder(bytes.NewReader(desired))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &state{}, nil
		}
		return nil, invalid("", "Invalid YAML string: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, unsupported("", "more than one YAML document")
	}
	st := &state{}
	if len(doc.Content) == 0 {
		return st, nil
	}
	top, err := mapping("", doc.Content[0], []string{"interfaces", "routes", "route-rules", "dns-resolver"}, otherTopKeys)
	if err != nil {
		return nil, err
	}
	for _, f := range top {
		switch f.key {
		case "interfaces":
			items, err := sequence(f.path, f.val, MaxInterfaces)
			if err != nil {
				return nil, err
			}
			for i, it := range items {
				ifc, err := parseIface(index(f.path, i), it)
				if err != nil {
					return nil, err
				}
				st.ifaces = append(st.ifaces, ifc)
			}
		case "routes":
			fs, err := mapping(f.path, f.val, []string{"config"}, []string{"running"})
			if err != nil {
				return nil, err
			}
			for _, c := range fs {
				items, err := sequence(c.path, c.val, MaxRoutes)
				if err != nil {
					return nil, err
				}
				for i, it := range items {
					r, err := parseRoute(index(c.path, i), it)
					if err != nil {
						return nil, err
					}
					st.routes = append(st.routes, r)
				}
			}
		case "route-rules":
			fs, err := mapping(f.path, f.val, []string{"config"}, nil)
			if err != nil {
				return nil, err
			}
			for _, c := range fs {
				items, err := sequence(c.path, c.val, MaxRouteRules)
				if err != nil {
					return nil, err
				}
				for i, it := range items {
					r, err := parseRule(index(c.path, i), it)
					if err != nil {
						return nil, err
					}
					st.rules = append(st.rules, r)
				}
			}
		case "dns-resolver":
			fs, err := mapping(f.path, f.val, []string{"config"}, []string{"running"})
			if err != nil {
				return nil, err
			}
			for _, c := range fs {
				if st.dns, err = parseDNS(c.path, c.val); err != nil {
					return nil, err
				}
			}
		}
	}
	return st, nil
}

var ifaceKeys = append([]string{"name", "type", "state", "mtu", "mac-address", "description", "ipv4", "ipv6",
	"link-aggregation", "bridge", "vlan", "vrf", "vxlan", "veth", "infiniband", "copy-mac-from"}, ifaceOptKeys...)

func parseIface(path string, n *yaml.Node) (*iface, error) {
	if err := checkNode(path, n); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, invalid(path, "invalid type: expected a mapping")
	}
	// A type outside the subset is refused at its key before its own keys
	// (mac-vlan:, libreswan:, patch: ...) are read.
	if tf, err := someFields(path, n, "type"); err == nil && len(tf) == 1 && tf[0].val.Kind == yaml.ScalarNode {
		if t := tf[0].val.Value; slices.Contains(otherTypes, t) {
			return nil, unsupported(tf[0].path, "interface type %q is outside the supported subset (%s)", t, strings.Join(supportedTypes, ", "))
		}
	}
	var fs []field
	var err error
	if isAbsent(n) {
		// nmstate keeps only name, type and state of an absent interface
		// and drops the rest unread (iface.rs, Deserialize for Interface).
		fs, err = someFields(path, n, "name", "type", "state")
	} else {
		fs, err = mapping(path, n, ifaceKeys, otherIfaceKeys)
	}
	if err != nil {
		return nil, err
	}
	ifc := &iface{path: path, typ: "ethernet", state: "up"}
	hasName := false
	for _, f := range fs {
		switch f.key {
		case "name":
			if ifc.name, err = str(f.path, f.val, maxTextLen, true); err != nil {
				return nil, err
			}
			hasName = true
		case "type":
			t, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return nil, err
			}
			switch {
			case slices.Contains(supportedTypes, t):
				ifc.typ = t
			default:
				return nil, unsupported(f.path, "unknown interface type %q", t)
			}
		case "state":
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return nil, err
			}
			switch s {
			case "up", "down", "absent":
				ifc.state = s
			case "unknown", "ignore":
				return nil, unsupported(f.path, "state %q is outside the supported subset (up, down, absent)", s)
			default:
				return nil, invalid(f.path, "unknown variant `%s`, expected one of `up`, `down`, `absent`, `unknown`, `ignore`", s)
			}
		}
	}
	if !hasName {
		return nil, invalid(path, "missing field `name`")
	}
	for _, f := range fs {
		switch f.key {
		case "mtu":
			v, err := unsigned(f.path, f.val, 1<<64-1)
			if err != nil {
				return nil, err
			}
			ifc.mtu = &v
		case "mac-address":
			if ifc.mac, err = str(f.path, f.val, maxTextLen, true); err != nil {
				return nil, err
			}
		case "description":
			d, err := str(f.path, f.val, maxDescriptionLen, true)
			if err != nil {
				return nil, err
			}
			ifc.desc = &d
		case "ipv4", "ipv6":
			ip, err := parseIP(f.path, f.val, f.key == "ipv6")
			if err != nil {
				return nil, err
			}
			if f.key == "ipv4" {
				ifc.ipv4 = ip
			} else {
				ifc.ipv6 = ip
			}
		case "link-aggregation":
			if ifc.typ != "bond" {
				return nil, unsupported(f.path, "link-aggregation is only read for type bond")
			}
			if ifc.bond, err = parseBond(f.path, f.val); err != nil {
				return nil, err
			}
		case "bridge":
			if ifc.typ != "linux-bridge" {
				return nil, unsupported(f.path, "bridge is only read for type linux-bridge")
			}
			if ifc.br, err = parseBridge(f.path, f.val); err != nil {
				return nil, err
			}
		case "profile-name", "identifier", "wait-ip", "lldp", "accept-all-mac-addresses", "ethernet", "ethtool", "mptcp":
			if err := parseIfaceOpt(ifc, f); err != nil {
				return nil, err
			}
		case "vrf", "vxlan", "veth", "infiniband":
			if ifc.typ != f.key {
				return nil, unsupported(f.path, "%s is only read for type %s", f.key, f.key)
			}
			switch f.key {
			case "vrf":
				ifc.vrf, err = parseVrf(f.path, f.val)
			case "vxlan":
				ifc.vxlan, err = parseVxlan(f.path, f.val)
			case "veth":
				ifc.vethPeer, err = parseVeth(f.path, f.val)
				ifc.uuidType = "ethernet"
			case "infiniband":
				ifc.ib, err = parseInfiniband(f.path, f.val)
			}
			if err != nil {
				return nil, err
			}
		case "copy-mac-from":
			if ifc.copyMAC, err = str(f.path, f.val, maxTextLen, true); err != nil {
				return nil, err
			}
			ifc.copyMACPath = f.path
		case "vlan":
			if ifc.typ != "vlan" {
				return nil, unsupported(f.path, "vlan is only read for type vlan")
			}
			if ifc.vlan, err = parseVlan(f.path, f.val); err != nil {
				return nil, err
			}
		}
	}
	return ifc, nil
}

func parseIP(path string, n *yaml.Node, v6 bool) (*ipConf, error) {
	known := []string{"enabled", "dhcp", "address"}
	for _, k := range ipOptKeys {
		if !slices.Contains(map[bool][]string{false: ipv6OnlyKeys, true: {"dhcp-client-id"}}[v6], k) {
			known = append(known, k)
		}
	}
	other := otherIPKeys
	if v6 {
		known = append(known, "autoconf")
	} else if !isNull(n) && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			switch n.Content[i].Value {
			case "autoconf", "dhcp-duid", "token", "addr-gen-mode":
				return nil, invalid(join(path, n.Content[i].Value), "Invalid YAML string: interfaces: %s is not allowed for IPv4", n.Content[i].Value)
			}
		}
	}
	if v6 && !isNull(n) && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			if n.Content[i].Value == "dhcp-client-id" {
				return nil, invalid(join(path, "dhcp-client-id"), "Invalid YAML string: interfaces: dhcp-client-id is not allowed for IPv6")
			}
		}
	}
	fs, err := mapping(path, n, known, other)
	if err != nil {
		return nil, err
	}
	ip := &ipConf{path: path}
	for _, f := range fs {
		switch f.key {
		case "enabled":
			ip.enabled, err = boolean(f.path, f.val)
		case "dhcp":
			ip.dhcp, err = boolean(f.path, f.val)
		case "autoconf":
			ip.autoconf, err = boolean(f.path, f.val)
		case "address":
			var items []*yaml.Node
			if items, err = sequence(f.path, f.val, MaxAddresses); err != nil {
				return nil, err
			}
			for i, it := range items {
				a, err := parseAddr(index(f.path, i), it)
				if err != nil {
					return nil, err
				}
				ip.addrs = append(ip.addrs, a)
			}
		default:
			err = parseIPOpt(ip, f)
		}
		if err != nil {
			return nil, err
		}
	}
	return ip, nil
}

func parseAddr(path string, n *yaml.Node) (ipAddr, error) {
	a := ipAddr{path: path}
	if isNull(n) {
		return a, invalid(path, "invalid type: expected a mapping")
	}
	fs, err := mapping(path, n, []string{"ip", "prefix-length"},
		[]string{"mptcp-flags", "valid-life-time", "valid-left", "valid-lft", "preferred-life-time", "preferred-left", "preferred-lft"})
	if err != nil {
		return a, err
	}
	var hasIP, hasPrefix bool
	for _, f := range fs {
		switch f.key {
		case "ip":
			if isNull(f.val) {
				return a, invalid(f.path, "invalid type: expected an IP address")
			}
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return a, err
			}
			if a.ip, err = parseIPAddr(s); err != nil {
				return a, invalid(f.path, "Invalid YAML string: interfaces: invalid IP address syntax: %q", s)
			}
			hasIP = true
		case "prefix-length":
			if isNull(f.val) {
				return a, invalid(f.path, "Required filed undefined")
			}
			// u8 in nmstate: anything larger fails to deserialise.
			if a.prefix, err = unsigned(f.path, f.val, 255); err != nil {
				return a, err
			}
			hasPrefix = true
		}
	}
	if !hasIP {
		return a, invalid(path, "Invalid YAML string: interfaces: missing field `ip`")
	}
	if !hasPrefix {
		return a, invalid(join(path, "prefix-length"), "Invalid YAML string: interfaces: missing field `prefix-length`")
	}
	return a, nil
}

// parseIPAddr accepts what Rust's IpAddr::from_str accepts: dotted quad
// without leading zeros, or IPv6 without a zone.
func parseIPAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return ip, err
	}
	if ip.Zone() != "" {
		return netip.Addr{}, errors.New("zone not allowed")
	}
	return ip, nil
}

var bondModes = map[string]string{
	"balance-rr": "balance-rr", "0": "balance-rr",
	"active-backup": "active-backup", "1": "active-backup",
	"balance-xor": "balance-xor", "2": "balance-xor",
	"broadcast": "broadcast", "3": "broadcast",
	"802.3ad": "802.3ad", "4": "802.3ad",
	"balance-tlb": "balance-tlb", "5": "balance-tlb",
	"balance-alb": "balance-alb", "6": "balance-alb",
}

func parseBond(path string, n *yaml.Node) (*bondConf, error) {
	fs, err := mapping(path, n, []string{"mode", "options", "port", "ports", "ports-config"}, nil)
	if err != nil {
		return nil, err
	}
	b := &bondConf{path: path, options: map[string]string{}}
	hasPorts := false
	for _, f := range fs {
		switch f.key {
		case "mode":
			s, err := numberOrString(f.path, f.val)
			if err != nil {
				return nil, err
			}
			if s == "unknown" {
				return nil, unsupported(f.path, "bond mode unknown is outside the supported subset")
			}
			m, ok := bondModes[s]
			if !ok {
				return nil, invalid(f.path, "unknown variant `%s`, expected one of `balance-rr`, `active-backup`, `balance-xor`, `broadcast`, `802.3ad`, `balance-tlb`, `balance-alb`", s)
			}
			b.mode = m
		case "options":
			b.optsPath = f.path
			opts, err := mapping(f.path, f.val, bondOptionKeys, otherBondOptions)
			if err != nil {
				return nil, err
			}
			for _, o := range opts {
				if err := parseBondOption(b, o); err != nil {
					return nil, err
				}
			}
		case "port", "ports":
			// serde's alias: both spellings fill the same field.
			if hasPorts {
				return nil, invalid(f.path, "duplicate field `port`")
			}
			hasPorts = true
			if b.ports, err = portNames(f.path, f.val); err != nil {
				return nil, err
			}
			b.portsPath = f.path
		case "ports-config":
			if err := parsePortsConfig(b, f); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// portNames reads a bond port list (names).
func portNames(path string, n *yaml.Node) ([]string, error) {
	items, err := sequence(path, n, MaxPorts)
	if err != nil {
		return nil, err
	}
	var names []string
	for i, it := range items {
		name, err := str(index(path, i), it, maxTextLen, true)
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

func parseBridge(path string, n *yaml.Node) (*bridgeConf, error) {
	fs, err := mapping(path, n, []string{"options", "port", "ports"}, nil)
	if err != nil {
		return nil, err
	}
	br := &bridgeConf{path: path, options: map[string]string{}}
	for _, f := range fs {
		switch f.key {
		case "options":
			if err := parseBridgeOptions(br, f); err != nil {
				return nil, err
			}
		case "port", "ports":
			// serde's alias, as for bonds.
			if br.portsGiven {
				return nil, invalid(f.path, "duplicate field `port`")
			}
			br.portsGiven = true
			br.portsPath = f.path
			items, err := sequence(f.path, f.val, MaxPorts)
			if err != nil {
				return nil, err
			}
			for i, it := range items {
				bp, err := parseBridgePort(index(f.path, i), it)
				if err != nil {
					return nil, err
				}
				br.ports = append(br.ports, bp.name)
				br.portConf = append(br.portConf, bp)
			}
		}
	}
	return br, nil
}

func parseVlan(path string, n *yaml.Node) (*vlanConf, error) {
	fs, err := mapping(path, n, []string{"base-iface", "id", "protocol", "registration-protocol", "reorder-headers", "loose-binding"}, nil)
	if err != nil {
		return nil, err
	}
	// vlan.flags: reorder-headers 1 (on unless false), gvrp 2,
	// loose-binding 4, mvrp 8 (settings/vlan.rs).
	v := &vlanConf{path: path, flags: 1}
	hasID := false
	for _, f := range fs {
		switch f.key {
		case "base-iface":
			if v.base, err = str(f.path, f.val, maxTextLen, true); err != nil {
				return nil, err
			}
			v.hasBase = true
		case "id":
			if v.id, err = unsigned(f.path, f.val, 1<<16-1); err != nil {
				return nil, err
			}
			hasID = true
		case "protocol":
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return nil, err
			}
			if s != "802.1q" && s != "802.1ad" {
				return nil, invalid(f.path, "unknown variant `%s`, expected `802.1q` or `802.1ad`", s)
			}
			v.protocol = s
		case "reorder-headers", "loose-binding":
			b, err := boolean(f.path, f.val)
			if err != nil {
				return nil, err
			}
			bit := map[string]uint64{"reorder-headers": 1, "loose-binding": 4}[f.key]
			v.flags &^= bit
			if b {
				v.flags |= bit
			}
		case "registration-protocol":
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return nil, err
			}
			switch s {
			case "gvrp":
				v.flags |= 2
			case "mvrp":
				v.flags |= 8
			case "none":
			default:
				return nil, invalid(f.path, "unknown variant `%s`, expected one of `gvrp`, `mvrp`, `none`", s)
			}
		}
	}
	if !hasID {
		return nil, invalid(join(path, "id"), "missing field `id`")
	}
	return v, nil
}

func parseRoute(path string, n *yaml.Node) (*route, error) {
	if isNull(n) {
		return nil, invalid(path, "invalid type: expected a mapping")
	}
	fs, err := mapping(path, n, []string{"state", "destination", "next-hop-interface", "next-hop-address", "metric", "table-id", "weight",
		"route-type", "cwnd", "source"}, nil)
	if err != nil {
		return nil, err
	}
	r := &route{path: path}
	for _, f := range fs {
		switch f.key {
		case "state":
			s, err := str(f.path, f.val, maxTextLen, false)
			if err != nil {
				return nil, err
			}
			if s != "absent" {
				return nil, invalid(f.path, "unknown variant `%s`, expected `absent`", s)
			}
			r.absent = true
		case "destination":
			r.dest, err = str(f.path, f.val, maxTextLen, false)
			r.hasDest = true
		case "next-hop-interface":
			r.iface, err = str(f.path, f.val, maxTextLen, false)
			r.hasIface = true
		case "next-hop-address":
			r.via, err = str(f.path, f.val, maxTextLen, false)
			r.hasVia = true
		case "metric":
			var v int64
			v, err = signed(f.path, f.val)
			r.metric = &v
		case "table-id":
			var v uint64
			v, err = unsigned(f.path, f.val, maxU32)
			r.table = &v
		case "weight":
			var v uint64
			v, err = unsigned(f.path, f.val, 1<<16-1)
			r.weight = &v
		case "cwnd":
			var v uint64
			v, err = unsigned(f.path, f.val, maxU32)
			r.cwnd = &v
		case "source":
			r.source, err = str(f.path, f.val, maxTextLen, false)
		case "route-type":
			if r.typ, err = str(f.path, f.val, maxTextLen, false); err == nil {
				switch r.typ {
				case "blackhole", "prohibit", "unreachable":
				default:
					err = invalid(f.path, "unknown variant `%s`, expected one of `blackhole`, `prohibit`, `unreachable`", r.typ)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

func parseDNS(path string, n *yaml.Node) (*dnsConfig, error) {
	fs, err := mapping(path, n, []string{"server", "search", "options"}, nil)
	if err != nil {
		return nil, err
	}
	d := &dnsConfig{path: path}
	for _, f := range fs {
		max := MaxDNSServers
		if f.key != "server" {
			max = MaxDNSSearches
		}
		items, err := sequence(f.path, f.val, max)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			p := index(f.path, i)
			s, err := str(p, it, maxTextLen, false)
			if err != nil {
				return nil, err
			}
			switch f.key {
			case "server":
				d.servers = append(d.servers, s)
				d.srvPaths = append(d.srvPaths, p)
			case "search":
				d.search = append(d.search, s)
			case "options":
				if err := checkDNSOption(p, s); err != nil {
					return nil, err
				}
				d.options = append(d.options, s)
			}
		}
	}
	return d, nil
}

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }

// numberOrString is nmstate's NumberAsString: an integer (written in
// decimal) or text; enum values like bond modes accept both.
func numberOrString(path string, n *yaml.Node) (string, error) {
	if n.Kind == yaml.ScalarNode && n.Style == 0 && untagged(n.Value) == "int" {
		m, neg, err := plainInt(n.Value)
		if err != nil {
			return "", invalid(path, "invalid integer %q", n.Value)
		}
		if neg {
			return "-" + uitoa(m), nil
		}
		return uitoa(m), nil
	}
	return str(path, n, maxTextLen, true)
}

func isAbsent(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "state" && n.Content[i+1].Kind == yaml.ScalarNode && n.Content[i+1].Value == "absent" {
			return true
		}
	}
	return false
}

// someFields returns the named fields of a mapping and ignores the others.
func someFields(path string, n *yaml.Node, keys ...string) ([]field, error) {
	var out []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !slices.Contains(keys, k.Value) {
			continue
		}
		p := join(path, k.Value)
		if err := checkNode(p, v); err != nil {
			return nil, err
		}
		out = append(out, field{key: k.Value, val: v, path: p})
	}
	return out, nil
}
