package nmstate

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Bond options (ifaces/bond.rs, settings/bond.rs): written under their
// kernel names; enums by name even when given by number.
var (
	bondU32Options  = []string{"miimon", "updelay", "downdelay", "arp_interval", "min_links", "resend_igmp", "num_grat_arp", "num_unsol_na", "packets_per_slave", "ad_actor_sys_prio", "ad_user_port_key", "lp_interval", "peer_notif_delay"}
	bondBoolOptions = []string{"tlb_dynamic_lb", "use_carrier"}
	bondEnumOptions = map[string][]string{
		"xmit_hash_policy":  {"layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4", "vlan+srcmac"},
		"lacp_rate":         {"slow", "fast"},
		"fail_over_mac":     {"none", "active", "follow"},
		"primary_reselect":  {"always", "better", "failure"},
		"arp_validate":      {"none", "active", "backup", "all", "filter", "filter_active", "filter_backup"},
		"arp_all_targets":   {"any", "all"},
		"ad_select":         {"stable", "bandwidth", "count"},
		"all_slaves_active": {"dropped", "delivered"}, // written as its number
	}
	bondTextOptions = []string{"primary", "ad_actor_system", "arp_ip_target"}
	// arp_missed_max: NetworkManager 1.42 drops it on load.
	otherBondOptions = []string{"balance-slb", "ns_ip6_target", "arp_missed_max"}
)

// bondOptionKeys is every option parseBondOption reads.
var bondOptionKeys = func() []string {
	out := append(append(append([]string{}, bondU32Options...), bondBoolOptions...), bondTextOptions...)
	for k := range bondEnumOptions {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}()

func parseBondOption(b *bondConf, o field) error {
	switch {
	case slices.Contains(bondU32Options, o.key):
		v, err := unsigned(o.path, o.val, maxU32)
		if err != nil {
			return err
		}
		switch o.key {
		case "miimon":
			b.miimon = v
		case "arp_interval":
			b.arpIntvl = v
		}
		b.options[o.key] = uitoa(v)
	case slices.Contains(bondBoolOptions, o.key):
		v, err := boolean(o.path, o.val)
		if err != nil {
			return err
		}
		b.options[o.key] = boolDigit(v)
	case o.key == "primary":
		s, err := str(o.path, o.val, maxTextLen, true)
		if err != nil {
			return err
		}
		b.options[o.key] = s
	case o.key == "ad_actor_system":
		s, err := str(o.path, o.val, maxTextLen, true)
		if err != nil {
			return err
		}
		if err := checkMAC(o.path, s); err != nil {
			return err
		}
		b.options[o.key] = strings.ToUpper(s)
	case o.key == "arp_ip_target":
		s, err := str(o.path, o.val, maxTextLen, true)
		if err != nil {
			return err
		}
		for _, t := range strings.Split(s, ",") {
			if ip, err := netip.ParseAddr(t); err != nil || !ip.Is4() {
				return unsupported(o.path, "arp_ip_target %q is not a comma-separated list of IPv4 addresses (NetworkManager would reject it)", s)
			}
		}
		b.options[o.key] = s
	default:
		names := bondEnumOptions[o.key]
		s, err := numberOrString(o.path, o.val)
		if err != nil {
			return err
		}
		i := slices.Index(names, s)
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(names) {
			i = n
		}
		if i < 0 {
			return invalid(o.path, "unknown variant `%s`, expected one of %s", s, "`"+strings.Join(names, "`, `")+"`")
		}
		b.options[o.key] = names[i]
		if o.key == "all_slaves_active" {
			b.options[o.key] = strconv.Itoa(i)
		}
	}
	return nil
}

// bondPort is one ports-config entry.
type bondPort struct {
	path     string
	name     string
	priority int64
	queueID  uint64
}

func parsePortsConfig(b *bondConf, f field) error {
	items, err := sequence(f.path, f.val, MaxPorts)
	if err != nil {
		return err
	}
	b.portsConfigPath = f.path
	for i, it := range items {
		p := bondPort{path: index(f.path, i)}
		fs, err := mapping(p.path, it, []string{"name", "priority", "queue-id"}, nil)
		if err != nil {
			return err
		}
		for _, e := range fs {
			switch e.key {
			case "name":
				p.name, err = str(e.path, e.val, maxTextLen, true)
			case "priority":
				p.priority, err = signed(e.path, e.val)
				if err == nil && (p.priority < -1<<31 || p.priority > 1<<31-1) {
					err = invalid(e.path, "priority %d out of range for i32", p.priority)
				}
			case "queue-id":
				var v uint64
				v, err = unsigned(e.path, e.val, 1<<16-1)
				p.queueID = v
			}
			if err != nil {
				return err
			}
		}
		if p.name == "" {
			return invalid(p.path, "missing field `name`")
		}
		b.portsConfig = append(b.portsConfig, p)
	}
	return nil
}

// checkPortsConfig: ports-config must name exactly the ports of port, or
// supplies them when port is not given (bond.rs).
func (ifc *iface) checkPortsConfig() error {
	b := ifc.bond
	if b == nil || b.portsConfigPath == "" {
		return nil
	}
	var names []string
	for _, p := range b.portsConfig {
		names = append(names, p.name)
	}
	if b.portsPath == "" {
		b.ports, b.portsPath = names, b.portsConfigPath
		return nil
	}
	a, c := slices.Clone(b.ports), slices.Clone(names)
	slices.Sort(a)
	slices.Sort(c)
	if !slices.Equal(slices.Compact(a), slices.Compact(c)) {
		return invalid(b.portsConfigPath, "The port names specified in `port` conflict with the port names specified in `ports-config` for bond interface: %s", ifc.name)
	}
	return nil
}

// bondPortSection is the port's [bond-port]: only non-zero settings, and
// only when ports-config names the port.
func (ifc *iface) bondPortSection() *section {
	b := ifc.controller.bond
	if b == nil {
		return nil
	}
	for _, p := range b.portsConfig {
		if p.name == ifc.name && (p.priority != 0 || p.queueID != 0) {
			s := newSection("bond-port")
			if p.priority != 0 {
				s.set("prio", strconv.FormatInt(p.priority, 10))
			}
			if p.queueID != 0 {
				s.set("queue-id", uitoa(p.queueID))
			}
			return s
		}
	}
	return nil
}

// Linux bridge options: nmstate name -> NetworkManager key, and how the
// value is read.
var bridgeOptions = map[string]struct {
	key  string
	kind string // "bool", "u64", "router", "protocol", "pvid"
}{
	"mac-ageing-time": {"ageing-time", "u64"}, "group-fwd-mask": {"group-forward-mask", "u64"},
	"hash-max": {"multicast-hash-max", "u64"}, "multicast-snooping": {"multicast-snooping", "bool"},
	"multicast-querier": {"multicast-querier", "bool"}, "multicast-query-use-ifaddr": {"multicast-query-use-ifaddr", "bool"},
	"multicast-router":            {"multicast-router", "router"},
	"multicast-last-member-count": {"multicast-last-member-count", "u64"}, "multicast-last-member-interval": {"multicast-last-member-interval", "u64"},
	"multicast-membership-interval": {"multicast-membership-interval", "u64"}, "multicast-querier-interval": {"multicast-querier-interval", "u64"},
	"multicast-query-interval": {"multicast-query-interval", "u64"}, "multicast-query-response-interval": {"multicast-query-response-interval", "u64"},
	"multicast-startup-query-count": {"multicast-startup-query-count", "u64"}, "multicast-startup-query-interval": {"multicast-startup-query-interval", "u64"},
	"vlan-protocol": {"vlan-protocol", "protocol"}, "vlan-default-pvid": {"vlan-default-pvid", "pvid"},
}

var (
	stpKeys            = []string{"enabled", "forward-delay", "hello-time", "max-age", "priority"}
	otherBridgeOptions = []string{"gc-timer", "group-addr", "group-forward-mask", "hash-elasticity", "hello-timer",
		"tcn-timer", "topology-change-timer"}
	bridgeOptionKeys = func() []string {
		out := []string{"stp"}
		for k := range bridgeOptions {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}()
)

func parseBridgeOptions(br *bridgeConf, f field) error {
	opts, err := mapping(f.path, f.val, bridgeOptionKeys, otherBridgeOptions)
	if err != nil {
		return err
	}
	for _, o := range opts {
		if o.key == "stp" {
			stp, err := mapping(o.path, o.val, stpKeys, nil)
			if err != nil {
				return err
			}
			for _, s := range stp {
				if s.key == "enabled" {
					v, err := boolean(s.path, s.val)
					if err != nil {
						return err
					}
					br.stp = &v
					continue
				}
				v, err := unsigned(s.path, s.val, 1<<16-1)
				if err != nil {
					return err
				}
				br.options[s.key] = uitoa(v)
			}
			continue
		}
		d := bridgeOptions[o.key]
		var v string
		switch d.kind {
		case "bool":
			var b bool
			b, err = boolean(o.path, o.val)
			v = strconv.FormatBool(b)
		case "u64", "pvid":
			var n uint64
			n, err = unsigned(o.path, o.val, maxU32)
			v = uitoa(n)
			if d.kind == "pvid" {
				br.pvid, br.pvidPath = n, o.path
			}
		case "router":
			v, err = numberOrString(o.path, o.val)
			names := []string{"disabled", "auto", "enabled"}
			if n, e := strconv.Atoi(v); e == nil && n >= 0 && n < 3 {
				v = names[n]
			} else if err == nil && !slices.Contains(names, v) {
				err = invalid(o.path, "unknown variant `%s`, expected one of `auto`, `disabled`, `enabled`", v)
			}
		case "protocol":
			v, err = str(o.path, o.val, maxTextLen, true)
			if err == nil && v != "802.1q" && v != "802.1ad" {
				err = invalid(o.path, "unknown variant `%s`, expected `802.1q` or `802.1ad`", v)
			}
		}
		if err != nil {
			return err
		}
		br.options[d.key] = v
	}
	return nil
}

// bridgePort is one bridge.port entry.
type bridgePort struct {
	name     string
	settings map[string]string // [bridge-port] key -> value
	vlans    string            // "" = no vlan block
	hasVLAN  bool
}

func parseBridgePort(path string, n *yaml.Node) (bridgePort, error) {
	bp := bridgePort{settings: map[string]string{}}
	fs, err := mapping(path, n, []string{"name", "stp-hairpin-mode", "stp-path-cost", "stp-priority", "vlan"}, nil)
	if err != nil {
		return bp, err
	}
	hasName := false
	for _, f := range fs {
		switch f.key {
		case "name":
			bp.name, err = str(f.path, f.val, maxTextLen, true)
			hasName = true
		case "stp-hairpin-mode":
			var b bool
			b, err = boolean(f.path, f.val)
			bp.settings["hairpin-mode"] = strconv.FormatBool(b)
		case "stp-path-cost", "stp-priority":
			var v uint64
			v, err = unsigned(f.path, f.val, maxU32)
			bp.settings[strings.TrimPrefix(f.key, "stp-")] = uitoa(v)
		case "vlan":
			bp.hasVLAN = true
			bp.vlans, err = parsePortVLAN(f.path, f.val)
		}
		if err != nil {
			return bp, err
		}
	}
	if !hasName {
		return bp, invalid(path, "missing field `name`")
	}
	return bp, nil
}
