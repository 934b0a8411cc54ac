package nmstate

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxRouteRules bounds route-rules.config.
const MaxRouteRules = 1024

// rule is one route-rules.config entry as parsed.
type rule struct {
	path              string
	family            string // "", "ipv4", "ipv6"
	from, to          string // as written
	priority          *uint64
	table             *uint64
	fwmark, fwmask    *uint64
	iif               string
	action            string
	suppressPrefixLen *uint64
}

// placedRule is a rule rendered and assigned to a profile's section.
type placedRule struct {
	iface string
	v6    bool
	text  string
}

var ruleKeys = []string{"family", "ip-from", "ip-to", "priority", "route-table", "fwmark", "fwmask", "iif", "action",
	"suppress-prefix-length", "suppress_prefixlength"}

func parseRule(path string, n *yaml.Node) (*rule, error) {
	if isNull(n) {
		return nil, invalid(path, "invalid type: expected a mapping")
	}
	fs, err := mapping(path, n, ruleKeys, []string{"state", "oif", "uid-range", "ipproto", "sport", "dport"})
	if err != nil {
		return nil, err
	}
	r := &rule{path: path}
	u := func(f field, max uint64) (*uint64, error) {
		v, err := unsigned(f.path, f.val, max)
		return &v, err
	}
	for _, f := range fs {
		switch f.key {
		case "family":
			if r.family, err = str(f.path, f.val, maxTextLen, false); err == nil && r.family != "ipv4" && r.family != "ipv6" {
				err = invalid(f.path, "unknown variant `%s`, expected `ipv4` or `ipv6`", r.family)
			}
		case "ip-from":
			r.from, err = str(f.path, f.val, maxTextLen, false)
		case "ip-to":
			r.to, err = str(f.path, f.val, maxTextLen, false)
		case "priority":
			r.priority, err = u(f, 1<<63-1)
		case "route-table":
			r.table, err = u(f, maxU32)
		case "fwmark":
			r.fwmark, err = u(f, maxU32)
		case "fwmask":
			r.fwmask, err = u(f, maxU32)
		case "suppress-prefix-length", "suppress_prefixlength":
			r.suppressPrefixLen, err = u(f, maxU32)
		case "iif":
			if r.iif, err = str(f.path, f.val, maxTextLen, false); err == nil {
				err = checkName(f.path, r.iif)
			}
		case "action":
			if r.action, err = str(f.path, f.val, maxTextLen, false); err == nil {
				switch r.action {
				case "blackhole", "prohibit", "unreachable":
				default:
					err = invalid(f.path, "unknown variant `%s`, expected one of `blackhole`, `prohibit`, `unreachable`", r.action)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if r.priority != nil && *r.priority > maxU32 {
		return nil, unsupported(join(path, "priority"), "priority %d does not fit NetworkManager's 32-bit rule priority", *r.priority)
	}
	return r, nil
}

// placeRules renders route-rules.config and picks the profile section
// each rule goes to (docs/nmstate.md, route-rules row of the subset table);
// a rule placed on "lo" makes the caller add gen_conf's lo profile.
func (st *state) placeRules(byName map[string]*iface, routes []sanitizedRoute) ([]placedRule, error) {
	var maxPrio uint64 = 29999
	for _, r := range st.rules {
		if r.priority != nil && *r.priority > maxPrio {
			maxPrio = *r.priority
		}
	}
	var out []placedRule
	for _, r := range st.rules {
		text, v6, err := r.render(&maxPrio)
		if err != nil {
			return nil, err
		}
		name, err := st.ruleIface(r, v6, byName, routes)
		if err != nil {
			return nil, err
		}
		out = append(out, placedRule{iface: name, v6: v6, text: text})
	}
	return out, nil
}

func (r *rule) render(maxPrio *uint64) (string, bool, error) {
	if r.family == "" && r.from == "" && r.to == "" {
		return "", false, invalid(r.path, "Neither ip-from, ip-to nor family is defined")
	}
	v6 := r.family == "ipv6"
	if r.family == "" {
		v6 = strings.Contains(r.from+r.to, ":")
	}
	var b strings.Builder
	prio := r.priority
	if prio == nil {
		*maxPrio++
		p := *maxPrio
		prio = &p
	}
	b.WriteString("priority " + uitoa(*prio))
	for _, p := range []struct{ word, key, v string }{{"to", "ip-to", r.to}, {"from", "ip-from", r.from}} {
		if p.v == "" {
			continue
		}
		n, err := sanitizeNetwork(join(r.path, p.key), p.v)
		if err != nil {
			return "", false, err
		}
		if n.Addr().Is6() != v6 {
			return "", false, invalid(join(r.path, p.key), "%s %s does not match the rule's family", p.key, p.v)
		}
		b.WriteString(" " + p.word + " " + n.String())
	}
	if r.from == "" && r.to == "" {
		b.WriteString(" from " + map[bool]string{false: "0.0.0.0/0", true: "::/0"}[v6])
	}
	if r.iif != "" {
		b.WriteString(" iif " + r.iif)
	}
	if r.suppressPrefixLen != nil {
		b.WriteString(" suppress_prefixlength " + uitoa(*r.suppressPrefixLen))
	}
	if r.action != "" {
		b.WriteString(" type " + r.action)
	}
	b.WriteString(" table " + strconv.FormatUint(r.tableID(), 10))
	if r.fwmark != nil {
		b.WriteString(" fwmark " + uitoa(*r.fwmark))
		if r.fwmask != nil {
			b.WriteString("/" + uitoa(*r.fwmask))
		}
	} else if r.fwmask != nil {
		return "", false, unsupported(join(r.path, "fwmask"), "fwmask without fwmark")
	}
	return b.String(), v6, nil
}

func (r *rule) tableID() uint64 {
	if r.table == nil || *r.table == 0 {
		return mainTable
	}
	return *r.table
}

// ruleIface is nmstate's find_interface_for_rule (nm/route_rule.rs) as gc
// runs it: the iif interface; else an interface with routes in the state
// that serves the rule's table; else the first interface of the state, by
// name, that serves it; else the first IP-enabled interface in document
// order; else lo. An interface serves a table when it has a route of the
// rule's family in it, or when the table is its auto-route-table-id (254
// when not given). nmstate walks the interfaces with routes in HashSet
// order, so with two of them serving the table its choice is random:
// refused.
func (st *state) ruleIface(r *rule, v6 bool, byName map[string]*iface, routes []sanitizedRoute) (string, error) {
	if r.iif != "" {
		ifc, ok := byName[r.iif]
		if !ok || ifc.state == "absent" || ifc.autoAdded {
			return "", invalid(join(r.path, "iif"), "The interface %s required by route rule does not exists", r.iif)
		}
		return ruleTarget(r, join(r.path, "iif"), ifc, v6)
	}
	table := r.tableID()
	serves := func(ifc *iface) bool {
		for _, rt := range routes {
			if rt.iface == ifc.name && rt.v6 == v6 && rt.writtenTable() == table {
				return true
			}
		}
		at := uint64(mainTable)
		if ip := ifc.ipConf(v6); ip != nil && ip.opts.autoTable != nil {
			at = *ip.opts.autoTable
		}
		return at == table
	}
	var withRoutes []*iface
	for _, ifc := range st.routeIfaces(byName, routes) {
		if serves(ifc) {
			withRoutes = append(withRoutes, ifc)
		}
	}
	switch len(withRoutes) {
	case 0:
	case 1:
		return ruleTarget(r, r.path, withRoutes[0], v6)
	default:
		names := make([]string, len(withRoutes))
		for i, ifc := range withRoutes {
			names[i] = ifc.name
		}
		return "", unsupported(r.path, "the rule's table %d is served by %s: nmstate picks one of them at random (a HashSet walk); give it iif, or a table only one interface has routes in", table, strings.Join(names, ", "))
	}
	byIfName := slices.Clone(st.candidates())
	slices.SortFunc(byIfName, func(a, b *iface) int { return strings.Compare(a.name, b.name) })
	for _, ifc := range byIfName {
		if serves(ifc) {
			return ruleTarget(r, r.path, ifc, v6)
		}
	}
	for _, ifc := range st.candidates() {
		if !ifc.noIP() && ifc.ipEnabled(v6) {
			return ifc.name, nil
		}
	}
	return "lo", nil
}

// routeIfaces are the interfaces the state's routes go to, lo included.
func (st *state) routeIfaces(byName map[string]*iface, routes []sanitizedRoute) []*iface {
	var out []*iface
	seen := map[string]bool{}
	for _, rt := range routes {
		if seen[rt.iface] {
			continue
		}
		seen[rt.iface] = true
		if ifc, ok := byName[rt.iface]; ok {
			out = append(out, ifc)
		} else if rt.iface == "lo" {
			out = append(out, loopback())
		}
	}
	return out
}

// ruleTarget is ifc for a rule gc stores there. gc keeps it in a disabled
// section (testdata/gcmade 213), but drops it from an interface the state
// gives no settings of the rule's family (217) and from a port, which has
// no IP sections: refused there, rather than lost.
func ruleTarget(r *rule, path string, ifc *iface, v6 bool) (string, error) {
	if ifc.noIP() || ifc.ipConf(v6) == nil {
		return "", unsupported(path, "gc would place the rule on %s, which has no %s settings in the state, and drop it there", ifc.name, map[bool]string{false: "ipv4", true: "ipv6"}[v6])
	}
	return ifc.name, nil
}

// loopback is the lo profile gen_conf writes from its synthetic current
// state when a rule or a typed route lands on lo.
func loopback() *iface {
	return &iface{path: "interfaces", name: "lo", typ: "loopback", state: "up",
		ipv4: &ipConf{enabled: true, addrs: []ipAddr{{ip: netip.MustParseAddr("127.0.0.1"), prefix: 8}}},
		ipv6: &ipConf{enabled: true, addrs: []ipAddr{{ip: netip.IPv6Loopback(), prefix: 128}}}}
}
