package nmstate

import (
	"net/netip"
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

// ruleIface: the iif interface; else the one interface with routes that
// serves the rule's table; else the first IP-enabled interface in document
// order; else lo. nmstate walks a HashSet in the second step, so with two
// or more candidates its choice is random: refused.
func (st *state) ruleIface(r *rule, v6 bool, byName map[string]*iface, routes []sanitizedRoute) (string, error) {
	if r.iif != "" {
		ifc, ok := byName[r.iif]
		if !ok || ifc.state == "absent" || ifc.autoAdded {
			return "", invalid(join(r.path, "iif"), "The interface %s required by route rule does not exists", r.iif)
		}
		if ifc.noIP() || !ifc.ipEnabled(v6) {
			return "", unsupported(join(r.path, "iif"), "the rule would be stored on %s, whose %s section is disabled or absent", r.iif, map[bool]string{false: "ipv4", true: "ipv6"}[v6])
		}
		return r.iif, nil
	}
	table := r.tableID()
	var cands, unsure []string
	for _, ifc := range st.candidates() {
		if ifc.noIP() || !ifc.ipEnabled(v6) {
			continue
		}
		has, serves := false, false
		for _, rt := range routes {
			if rt.iface == ifc.name {
				has = true
				if rt.writtenTable() == table {
					serves = true
				}
			}
		}
		// An interface counts as its auto-route-table-id's table (254
		// when not given), whatever its routes.
		at := ifc.ipConf(v6).opts.autoTable
		if (at == nil && table == mainTable) || (at != nil && *at == table) {
			serves = true
			if !has && at != nil && table != mainTable {
				unsure = append(unsure, ifc.name)
			}
		}
		if has && serves {
			cands = append(cands, ifc.name)
		}
	}
	switch {
	case len(cands) == 1:
		return cands[0], nil
	case len(cands) > 1:
		return "", unsupported(r.path, "the rule's table %d is served by %s: nmstate picks one of them at random (a HashSet walk); give it iif, or a table only one interface has routes in", table, strings.Join(cands, ", "))
	case len(unsure) > 0:
		// No vector shows where gc puts such a rule: refuse rather than
		// guess.
		return "", unsupported(r.path, "the rule's table %d is the auto-route-table-id of %s, which has no routes: where gc places this rule is not verified; give it iif", table, strings.Join(unsure, ", "))
	}
	for _, ifc := range st.candidates() {
		if !ifc.noIP() && ifc.ipEnabled(v6) {
			return ifc.name, nil
		}
	}
	return "lo", nil
}

// loopback is the lo profile gen_conf writes from its synthetic current
// state when a rule or a typed route lands on lo.
func loopback() *iface {
	return &iface{path: "interfaces", name: "lo", typ: "loopback", state: "up",
		ipv4: &ipConf{enabled: true, addrs: []ipAddr{{ip: netip.MustParseAddr("127.0.0.1"), prefix: 8}}},
		ipv6: &ipConf{enabled: true, addrs: []ipAddr{{ip: netip.IPv6Loopback(), prefix: 128}}}}
}
