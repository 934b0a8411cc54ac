package nmstate

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// MatchedVersion is the nmstate whose `nmstatectl gc` output this package
// reproduces: github.com/nmstate/nmstate at MatchedCommit, 8 commits after
// tag v2.2.37 (its Cargo.toml already says 2.2.38).
const (
	MatchedVersion = "v2.2.37-8-g614c66dc"
	MatchedCommit  = "614c66dc7a0f861138646605d2a85e130169c80a"
)

// Keyfile is one NetworkManager keyfile: a file name in
// /etc/NetworkManager/system-connections and its contents.
type Keyfile struct {
	Name    string
	Content []byte
}

// GenerateKeyfiles returns the keyfiles `nmstatectl gc` writes for the
// desired state (YAML or JSON, placeholders already substituted), in the
// order nmstatectl lists them. It refuses (with *Error) any input outside
// the supported subset or that nmstate refuses.
func GenerateKeyfiles(desired []byte) ([]Keyfile, error) {
	st, err := parse(desired)
	if err != nil {
		return nil, err
	}
	byName, err := st.resolve()
	if err != nil {
		return nil, err
	}
	routes, err := st.sanitizeRoutes(byName)
	if err != nil {
		return nil, err
	}
	dns, err := st.placeDNS()
	if err != nil {
		return nil, err
	}
	rules, err := st.placeRules(byName, routes)
	if err != nil {
		return nil, err
	}
	var profiles []*iface
	for _, ifc := range st.ifaces {
		if ifc.state != "absent" {
			profiles = append(profiles, ifc)
		}
	}
	if _, ok := byName["lo"]; !ok && needsLoopback(routes, rules) {
		profiles = append(profiles, loopback())
	}
	ids := map[string]*iface{}
	for _, ifc := range profiles {
		if prev, ok := ids[ifc.id()]; ok {
			// gc would list two profiles under one file name.
			return nil, unsupported(join(ifc.path, "profile-name"), "profile %q of %s is also the profile of %s", ifc.id(), ifc.name, prev.name)
		}
		ids[ifc.id()] = ifc
	}
	pl := &layout{routes: routes, dns: dns, rules: rules}
	dnsPath := ""
	if st.dns != nil {
		dnsPath = st.dns.path
	}
	if err := checkMethods(profiles, routes, dns, dnsPath); err != nil {
		return nil, err
	}
	// By name, byte-wise, then (stably) by nmstate's up-priority
	// (docs/nmstate.md, "Listing order").
	prio := upPriorities(profiles, byName)
	slices.SortFunc(profiles, func(a, b *iface) int { return strings.Compare(a.name, b.name) })
	slices.SortStableFunc(profiles, func(a, b *iface) int { return cmp.Compare(prio[a], prio[b]) })
	profiles = peersAfterVeths(profiles)
	out := make([]Keyfile, 0, len(profiles))
	for _, ifc := range profiles {
		out = append(out, Keyfile{Name: ifc.id() + ".nmconnection", Content: render(ifc.sections(pl))})
	}
	return out, nil
}

// peersAfterVeths lists each generated veth peer right after its veth,
// whatever the peer's name: gc makes the peer's profile together with the
// veth's and lists it there (testdata/gcmade 202).
func peersAfterVeths(ps []*iface) []*iface {
	peers := map[string]*iface{}
	for _, p := range ps {
		if p.generated && p.typ == "veth" {
			peers[p.vethPeer] = p
		}
	}
	out := make([]*iface, 0, len(ps))
	for _, p := range ps {
		if p.generated && p.typ == "veth" {
			continue
		}
		out = append(out, p)
		if peer, ok := peers[p.name]; ok {
			out = append(out, peer)
		}
	}
	return out
}

// GC returns what `nmstatectl gc` prints, as the pairs its YAML holds under
// NetworkManager: [[file name, contents], ...].
func GC(desired []byte) ([][2]string, error) {
	kfs, err := GenerateKeyfiles(desired)
	if err != nil {
		return nil, err
	}
	out := make([][2]string, len(kfs))
	for i, kf := range kfs {
		out[i] = [2]string{kf.Name, string(kf.Content)}
	}
	return out, nil
}

// upPriorities is nmstate's up-priority (ifaces/inter_ifaces_controller.rs,
// as the order-* vectors show it): 0 for a free interface; the controller's
// priority + 1 for an up port defined in the file (an auto-added port keeps
// 0); the parent's priority + 1 for an up child (VLAN) whose parent is in
// the desired state, whatever the parent's own state.
func upPriorities(profiles []*iface, byName map[string]*iface) map[*iface]int {
	out := map[*iface]int{}
	var prio func(ifc *iface, depth int) int
	prio = func(ifc *iface, depth int) int {
		if p, ok := out[ifc]; ok {
			return p
		}
		p := 0
		if depth <= MaxInterfaces && ifc.state == "up" {
			switch up := ifc.upper(byName); {
			case up == nil:
			case ifc.controller != nil && ifc.autoAdded:
			default:
				p = prio(up, depth+1) + 1
			}
		}
		out[ifc] = p
		return p
	}
	for _, ifc := range profiles {
		prio(ifc, 0)
	}
	return out
}

// upper is the interface this one is brought up after: its controller, or
// the parent of a VLAN when that parent is in the desired state.
func (ifc *iface) upper(byName map[string]*iface) *iface {
	if ifc.controller != nil {
		return ifc.controller
	}
	if name := ifc.parentName(); name != "" {
		if p, ok := byName[name]; ok && p.state != "absent" && p != ifc {
			return p
		}
	}
	return nil
}

var nmTypes = map[string]string{"ethernet": "802-3-ethernet", "bond": "bond", "linux-bridge": "bridge", "vlan": "vlan", "dummy": "dummy", "loopback": "loopback",
	"vrf": "vrf", "vxlan": "vxlan", "veth": "veth", "infiniband": "infiniband"}

// layout is what gen_conf placed on the profiles: routes, DNS and rules.
type layout struct {
	routes []sanitizedRoute
	dns    placement
	rules  []placedRule
}

func needsLoopback(routes []sanitizedRoute, rules []placedRule) bool {
	for _, r := range routes {
		if r.iface == "lo" {
			return true
		}
	}
	for _, r := range rules {
		if r.iface == "lo" {
			return true
		}
	}
	return false
}

func (ifc *iface) sections(pl *layout) []*section {
	conn := newSection("connection")
	conn.set("id", ifc.id())
	conn.set("uuid", UUIDv5(namespaceURL, cmpOr(ifc.uuidType, ifc.typ)+"://"+ifc.name))
	conn.set("type", nmTypes[ifc.typ])
	if !ifc.opts.byMAC {
		conn.set("interface-name", ifc.name)
	}
	conn.set("autoconnect", strconv.FormatBool(ifc.state != "down"))
	conn.set("autoconnect-slaves", "-1")
	if ifc.typ == "bond" || ifc.typ == "linux-bridge" || ifc.typ == "vrf" {
		conn.set("autoconnect-slaves", "1")
	}
	secs := []*section{conn}
	if c := ifc.controller; c != nil {
		conn.set("master", c.name)
		if c.typ == "vrf" {
			conn.set("slave-type", "vrf")
			secs = append(secs, ifc.ipSection(false, pl), ifc.ipSection(true, pl))
		} else if c.typ == "bond" {
			conn.set("slave-type", "bond")
			if bp := ifc.bondPortSection(); bp != nil {
				secs = append(secs, bp)
			}
		} else {
			conn.set("slave-type", "bridge")
			bp := newSection("bridge-port")
			for _, p := range c.br.portConf {
				if p.name == ifc.name {
					for k, v := range p.settings {
						bp.set(k, v)
					}
					bp.set("vlans", p.vlans)
				}
			}
			secs = append(secs, bp)
		}
	} else {
		secs = append(secs, ifc.ipSection(false, pl), ifc.ipSection(true, pl))
	}
	secs = append(secs, ifc.bondBridgeVLANSection()...)
	secs = append(secs, ifc.writeIfaceOpts(conn)...)
	secs = append(secs, ifc.kindSections()...)
	if ifc.desc != nil {
		u := newSection("user")
		u.set("nmstate.interface.description", *ifc.desc)
		secs = append(secs, u)
	}
	return secs
}

// bondBridgeVLANSection is the [bond], [bridge] or [vlan] section of those
// kinds (the other kinds' own sections: kindSections).
func (ifc *iface) bondBridgeVLANSection() []*section {
	switch ifc.typ {
	case "bond":
		b := newSection("bond")
		b.set("mode", ifc.bond.mode)
		for k, v := range ifc.bond.options {
			b.set(k, v)
		}
		return []*section{b}
	case "linux-bridge":
		b := newSection("bridge")
		if br := ifc.br; br != nil {
			if br.stp != nil {
				b.set("stp", strconv.FormatBool(*br.stp))
			}
			for k, v := range br.options {
				b.set(k, v)
			}
			if br.portsGiven {
				b.set("vlan-filtering", strconv.FormatBool(br.filtering()))
			}
		}
		return []*section{b}
	case "vlan":
		v := newSection("vlan")
		v.set("flags", uitoa(ifc.vlan.flags))
		v.set("id", strconv.FormatUint(ifc.vlan.id, 10))
		v.set("parent", ifc.vlan.base)
		if ifc.vlan.protocol == "802.1ad" {
			v.set("protocol", "802.1ad")
		}
		return []*section{v}
	}
	return nil
}

const forever = "2147483647" // i32::MAX, nmstate's "no timeout"

func (ifc *iface) ipSection(v6 bool, pl *layout) *section {
	routes, dns := pl.routes, pl.dns
	name := "ipv4"
	if v6 {
		name = "ipv6"
	}
	s := newSection(name)
	s.set("dhcp-timeout", forever)
	if w, ok := waitIP[ifc.opts.waitIP]; ok {
		s.set("may-fail", w[map[bool]int{false: 0, true: 1}[v6]])
	}
	ip := ifc.ipConf(v6)
	if ip == nil {
		s.set("method", "disabled")
		return s
	}
	if v6 {
		s.set("addr-gen-mode", "0")
		if ip.opts.addrGenMode == "stable-privacy" {
			s.set("addr-gen-mode", "1")
		}
	}
	mine := ifc.routesOf(v6, routes)
	addrs := ip.addrStrings()
	method := ip.method(v6, addrs, mine)
	s.set("method", method)
	for i, a := range addrs {
		s.set("address"+strconv.Itoa(i), a)
	}
	for i, r := range mine {
		s.set("route"+strconv.Itoa(i), r.keyfileValue())
		s.set("route"+strconv.Itoa(i)+"_options", r.opts)
	}
	if method == "auto" || method == "dhcp" {
		ip.writeAuto(s, v6)
	}
	n := 0
	for _, r := range pl.rules {
		if r.iface == ifc.name && r.v6 == v6 {
			s.set("routing-rule"+strconv.Itoa(n), r.text)
			n++
		}
	}
	if k := dns.get(ifc.name, v6); k != nil {
		s.set("dns", strings.Join(k.servers, ";"))
		s.set("dns-search", strings.Join(k.search, ";"))
		s.set("dns-options", strings.Join(k.options, ";"))
		s.set("dns-priority", strconv.Itoa(k.priority))
	}
	return s
}

// routesOf are the routes written into this interface's section of a
// family: none when the family is disabled.
func (ifc *iface) routesOf(v6 bool, routes []sanitizedRoute) []sanitizedRoute {
	var mine []sanitizedRoute
	if ip := ifc.ipConf(v6); ip != nil && ip.enabled {
		for _, r := range routes {
			if r.iface == ifc.name && r.v6 == v6 {
				mine = append(mine, r)
			}
		}
	}
	return mine
}

// method is nmstate's choice of ipv4.method / ipv6.method (settings/ip.rs).
func (ip *ipConf) method(v6 bool, addrs []string, routes []sanitizedRoute) string {
	switch {
	case !ip.enabled:
		return "disabled"
	case !v6 && ip.dhcp:
		return "auto"
	case v6 && ip.dhcp && ip.autoconf:
		return "auto"
	case v6 && ip.dhcp:
		return "dhcp"
	case len(addrs) > 0 || len(routes) > 0:
		return "manual"
	case v6:
		return "link-local"
	}
	return "disabled"
}

// checkMethods refuses what nmstate writes but NetworkManager will not
// load: method=manual without an address (routes alone make nmstate choose
// manual), DNS keys in a disabled or link-local section (search domains without servers
// go to the first IP-enabled interface, even one without addresses).
func checkMethods(profiles []*iface, routes []sanitizedRoute, dns placement, dnsPath string) error {
	for _, ifc := range profiles {
		if ifc.noIP() {
			continue
		}
		for _, v6 := range []bool{false, true} {
			ip := ifc.ipConf(v6)
			if ip == nil {
				continue
			}
			addrs := ip.addrStrings()
			method := ip.method(v6, addrs, ifc.routesOf(v6, routes))
			if len(addrs) == 0 && method == "manual" {
				return unsupported(ip.path, "routes on an interface without a static address and without DHCP: nmstate writes method=manual without addresses, which NetworkManager refuses")
			}
			if (method == "disabled" || method == "link-local") && dns.get(ifc.name, v6) != nil {
				return unsupported(join(dnsPath, "search"), "nmstate puts the search domains on %s, whose %s method is %s, which NetworkManager refuses", ifc.name, map[bool]string{false: "ipv4", true: "ipv6"}[v6], method)
			}
		}
	}
	return nil
}
