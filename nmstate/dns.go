package nmstate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

const (
	dnsPriorityPreferred = 40
	dnsPriorityOther     = 50
)

// dnsKeys are the DNS keys one [ipv4] or [ipv6] section receives.
type dnsKeys struct {
	servers  []string
	search   []string
	options  []string
	priority int
}

// dnsOptions are the resolv.conf options nmstate takes (dns.rs); those in
// dnsValueOptions take ":n".
var (
	dnsOptions = []string{"debug", "edns0", "inet6", "ip6-bytestring", "ip6-dotint", "no-aaaa", "no-check-names",
		"no-ip6-dotint", "no-reload", "no-tld-query", "rotate", "single-request", "single-request-reopen", "trust-ad", "use-vc"}
	dnsValueOptions = []string{"ndots", "timeout", "attempts"}
)

func checkDNSOption(path, o string) error {
	name, val, hasVal := strings.Cut(o, ":")
	ok := !hasVal && slices.Contains(dnsOptions, o)
	if hasVal && slices.Contains(dnsValueOptions, name) {
		n, err := strconv.ParseUint(val, 10, 8)
		ok = err == nil && val[0] != '+' && n <= 255
	}
	if !ok {
		return invalid(path, "Unsupported DNS option %s, only support these without value: %s and these with values: ndots:n, timeout:n, attempts", o, strings.Join(dnsOptions, ", "))
	}
	return nil
}

// placement maps interface name -> family (false v4, true v6) -> keys.
type placement map[string]map[bool]*dnsKeys

func (p placement) set(name string, v6 bool, k *dnsKeys) {
	if p[name] == nil {
		p[name] = map[bool]*dnsKeys{}
	}
	p[name][v6] = k
}

func (p placement) get(name string, v6 bool) *dnsKeys { return p[name][v6] }

// placeDNS decides which interface sections carry dns-resolver.config,
// following nmstate's nm/dns.rs in gen_conf mode (no current state).
func (st *state) placeDNS() (placement, error) {
	out := placement{}
	d := st.dns
	if d == nil {
		return out, nil
	}
	var servers []string
	for i, s := range d.servers {
		c, err := sanitizeDNSServer(d.srvPaths[i], s)
		if err != nil {
			return nil, err
		}
		servers = append(servers, c)
	}
	for i, s := range d.search {
		if err := checkSearch(index(join(d.path, "search"), i), s); err != nil {
			return nil, err
		}
	}
	if len(servers) == 0 {
		if len(d.search) == 0 && len(d.options) == 0 {
			return out, nil
		}
		name, v6, ok := st.searchOnlyIface()
		if !ok {
			return nil, invalid(join(d.path, "search"), "Failed to find suitable(IP enabled) interface for DNS searches '%s'", strings.Join(d.search, " "))
		}
		out.set(name, v6, &dnsKeys{search: d.search, options: d.options, priority: dnsPriorityPreferred})
		return out, nil
	}
	if len(servers) > 2 && mixed(servers) {
		return nil, &Error{Path: join(d.path, "server"), Kind: KindNotImplemented,
			Reason: "Placing IPv4/IPv6 nameserver in the middle of IPv6/IPv4 nameservers is not supported yet"}
	}
	preferV6 := strings.Contains(servers[0], ":")
	var v4, v6 []string
	for _, s := range servers {
		if strings.Contains(s, ":") {
			v6 = append(v6, s)
		} else {
			v4 = append(v4, s)
		}
	}
	// nmstate stores IPv6 first, then IPv4; each family fails on its own.
	for _, fam := range []struct {
		v6      bool
		servers []string
	}{{true, v6}, {false, v4}} {
		if len(fam.servers) == 0 {
			continue
		}
		name, ok := st.dnsIface(fam.v6)
		if !ok {
			return nil, invalid(join(d.path, "server"), "Failed to find suitable(IP enabled) interface for DNS server %s", quoteList(fam.servers))
		}
		k := &dnsKeys{servers: fam.servers, priority: dnsPriorityOther}
		if fam.v6 == preferV6 {
			k.search, k.options, k.priority = d.search, d.options, dnsPriorityPreferred
		}
		out.set(name, fam.v6, k)
	}
	return out, nil
}

func quoteList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func mixed(servers []string) bool {
	pattern := ""
	for _, s := range servers {
		c := "4"
		if strings.Contains(s, ":") {
			c = "6"
		}
		if !strings.HasSuffix(pattern, c) {
			pattern += c
		}
	}
	return strings.Contains(pattern, "464") || strings.Contains(pattern, "646")
}

func sanitizeDNSServer(path, s string) (string, error) {
	if strings.Contains(s, ":") && strings.Contains(s, "%") {
		return "", unsupported(path, "link-local DNS servers with an interface scope are outside the supported subset")
	}
	ip, err := parseIPAddr(s)
	if err != nil || ip.Is6() != strings.Contains(s, ":") {
		return "", invalid(path, "Invalid DNS server string %s", s)
	}
	if ip.Is4In6() {
		return "", unsupported(path, "IPv4-mapped IPv6 DNS server %s is outside the supported subset", s)
	}
	return ip.String(), nil
}

// checkSearch keeps search domains to host-name characters; anything else
// could break the dns-search list or change under GKeyFile escaping.
func checkSearch(path, s string) error {
	if s == "" || len(s) > maxDNSSearchLength {
		return unsupported(path, "search domain %q is empty or longer than %d bytes", s, maxDNSSearchLength)
	}
	for _, c := range []byte(s) {
		if !(c == '.' || c == '-' || c == '_' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')) {
			return unsupported(path, "search domain %q holds %q; only letters, digits, '.', '-' and '_' are supported", s, c)
		}
	}
	return nil
}

// candidates are the desired, non-absent interfaces in document order;
// auto-added ports and generated veth peers have no IP and never qualify,
// and nmstate skips the loopback for DNS and rules.
func (st *state) candidates() []*iface {
	var out []*iface
	for _, ifc := range st.ifaces {
		if ifc.state != "absent" && !ifc.autoAdded && !ifc.generated && ifc.typ != "loopback" {
			out = append(out, ifc)
		}
	}
	return out
}

// dnsIface is nmstate's find_dns_iface without current state: the first
// interface preferred for DNS (static with an address), else the first
// valid one (static with an address, or dynamic).
func (st *state) dnsIface(v6 bool) (string, bool) {
	for _, ifc := range st.candidates() {
		if ip := ifc.ipConf(v6); ip.isStatic(v6) || (ip.isAuto(v6) && ip.opts.autoDNS != nil && !*ip.opts.autoDNS) {
			return ifc.name, true
		}
	}
	for _, ifc := range st.candidates() {
		ip := ifc.ipConf(v6)
		if ip.isStatic(v6) || ip.isAuto(v6) {
			return ifc.name, true
		}
	}
	return "", false
}

// searchOnlyIface is nmstate's choice for search domains without servers:
// the first dynamic interface (IPv6 checked before IPv4 on each), else the
// first IP-enabled one.
func (st *state) searchOnlyIface() (string, bool, bool) {
	for _, ifc := range st.candidates() {
		if ifc.ipv6.isAuto(true) {
			return ifc.name, true, true
		}
		if ifc.ipv4.isAuto(false) {
			return ifc.name, false, true
		}
	}
	for _, ifc := range st.candidates() {
		if ifc.ipEnabled(true) {
			return ifc.name, true, true
		}
		if ifc.ipEnabled(false) {
			return ifc.name, false, true
		}
	}
	return "", false, false
}

func (ifc *iface) ipConf(v6 bool) *ipConf {
	if v6 {
		return ifc.ipv6
	}
	return ifc.ipv4
}

// isStatic is nmstate's is_static: enabled, not dynamic, at least one
// address left after dropping IPv6 link-local ones.
func (ip *ipConf) isStatic(v6 bool) bool {
	return ip != nil && ip.enabled && !ip.isAuto(v6) && len(ip.staticAddrs()) > 0
}
