package nmstate

import (
	"net/netip"
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
