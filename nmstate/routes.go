package nmstate

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

const mainTable = 254

// stableSortMax is the length up to which Rust's sort_unstable (pdqsort,
// and ipnsort after it) sorts by insertion, i.e. stably.
const stableSortMax = 20

// sanitizedRoute is a desired route after nmstate's validate and sanitize:
// destination and next hop in canonical text.
type sanitizedRoute struct {
	path   string
	v6     bool
	table  uint64 // sort key: missing = 254, 0 kept as 0
	iface  string
	dest   string
	via    string
	weight uint64
	source string
	cwnd   uint64
	metric uint64 // written value
	opts   string // route<i>_options value
}

// writtenTable is the table the route is written with (0 and missing are
// the main table).
func (sr sanitizedRoute) writtenTable() uint64 {
	if sr.table == 0 {
		return mainTable
	}
	return sr.table
}

// routes checks the routes.config entries in nmstate's order (validate,
// then sanitize, then the next-hop interface checks) and returns the
// non-absent ones sorted and de-duplicated as nmstate does.
func (st *state) sanitizeRoutes(byName map[string]*iface) ([]sanitizedRoute, error) {
	for _, r := range st.routes {
		if !r.absent && r.typ != "" {
			if r.hasIface {
				return nil, unsupported(join(r.path, "next-hop-interface"), "a route-type route with a next-hop-interface is outside the supported subset (nmstate stores typed routes on lo)")
			}
			r.iface, r.hasIface = "lo", true
			if r.hasVia {
				return nil, unsupported(join(r.path, "next-hop-address"), "a route-type route with a next-hop-address is outside the supported subset")
			}
		}
		if !r.absent && !r.hasIface {
			return nil, &Error{Path: join(r.path, "next-hop-interface"), Kind: KindNotImplemented,
				Reason: "Route with empty next hop interface is not supported"}
		}
		if err := checkDestination(r); err != nil {
			return nil, err
		}
	}
	var out []sanitizedRoute
	for _, r := range st.routes {
		sr, err := sanitizeRoute(r)
		if err != nil {
			return nil, err
		}
		if r.absent {
			// Absent routes only match current routes; gc has none.
			continue
		}
		if err := checkRouteIface(r, sr, byName); err != nil {
			return nil, err
		}
		out = append(out, sr)
	}
	// nmstate sorts with sort_unstable, which is an insertion sort (stable)
	// for the short lists a node carries; dedup then keeps the first of
	// routes that differ only in metric.
	slices.SortStableFunc(out, compareRoutes)
	var kept []sanitizedRoute
	for _, sr := range out {
		if n := len(kept); n > 0 && compareRoutes(kept[n-1], sr) == 0 {
			if len(out) > stableSortMax && kept[n-1].metric != sr.metric {
				// Past the insertion-sort size the survivor depends on
				// the sort's internals: refuse rather than guess.
				return nil, unsupported(sr.path, "more than %d routes, two of them differing only in metric", stableSortMax)
			}
			continue
		}
		kept = append(kept, sr)
	}
	return kept, nil
}

func compareRoutes(a, b sanitizedRoute) int {
	// IPv6 before IPv4 (nmstate's key holds "is IPv4"), then table,
	// next-hop interface, destination text, next-hop text, weight.
	if a.v6 != b.v6 {
		if a.v6 {
			return -1
		}
		return 1
	}
	return cmp.Or(
		cmp.Compare(a.table, b.table),
		strings.Compare(a.iface, b.iface),
		strings.Compare(a.dest, b.dest),
		strings.Compare(a.via, b.via),
		strings.Compare(a.source, b.source),
		cmp.Compare(a.weight, b.weight),
		cmp.Compare(a.cwnd, b.cwnd),
	)
}

var errDst0 = "0.0.0.0/8 and its subnet cannot be used as the route destination for unicast route, please use the default gateway 0.0.0.0/0 instead"

// checkDestination is nmstate's validate_route_dst.
func checkDestination(r *route) error {
	p := join(r.path, "destination")
	if !r.hasDest || strings.Contains(r.dest, ":") {
		return nil
	}
	ipText, prefix, hasPrefix := strings.Cut(r.dest, "/")
	ip, err := netip.ParseAddr(ipText)
	if err != nil || !ip.Is4() {
		return invalid(p, "Invalid IPv4 address %q in route destination", ipText)
	}
	if ip.As4()[0] != 0 {
		return nil
	}
	if !hasPrefix {
		return invalid(p, "%s", errDst0)
	}
	n, err := strconv.ParseInt(prefix, 10, 32)
	if err != nil {
		return invalid(p, "The prefix of the route destination network '%s' is invalid", r.dest)
	}
	if n >= 8 {
		return invalid(p, "%s", errDst0)
	}
	return nil
}

func sanitizeRoute(r *route) (sanitizedRoute, error) {
	sr := sanitizedRoute{path: r.path, iface: r.iface, table: mainTable}
	if !r.hasDest || r.dest == "" {
		if r.absent {
			return sr, nil
		}
		return sr, unsupported(join(r.path, "destination"), "a route without destination is outside the supported subset")
	}
	dest, err := sanitizeNetwork(join(r.path, "destination"), r.dest)
	if err != nil {
		return sr, err
	}
	sr.dest = dest.String()
	sr.v6 = strings.Contains(r.dest, ":")
	if r.hasVia {
		via, err := parseIPAddr(r.via)
		if err != nil {
			return sr, invalid(join(r.path, "next-hop-address"), "invalid IP address syntax: %q", r.via)
		}
		sr.via = via.String()
		if !r.absent && (via.Is6() != sr.v6 || via.Is4In6()) {
			// nmstate writes it; NetworkManager drops such a route.
			return sr, unsupported(join(r.path, "next-hop-address"), "next hop %s is not of the destination's address family", via)
		}
	}
	if r.weight != nil {
		if *r.weight < 1 || *r.weight > 256 {
			return sr, invalid(join(r.path, "weight"), "Invalid ECMP route weight %d, should be in the range of 1 to 256", *r.weight)
		}
		if sr.v6 {
			return sr, &Error{Path: join(r.path, "weight"), Kind: KindNotSupported, Reason: "IPv6 ECMP route with weight is not supported yet"}
		}
		sr.weight = *r.weight
	}
	if r.metric != nil && !r.absent {
		switch m := *r.metric; {
		case m == -1:
		case m < -1 || m > maxU32:
			// nmstate would write the value cast to 32 bits.
			return sr, unsupported(join(r.path, "metric"), "metric %d is outside 0..4294967295 (or -1 for the default)", m)
		default:
			sr.metric = uint64(m)
		}
	}
	written := uint64(mainTable)
	if r.table != nil {
		sr.table = *r.table
		if *r.table != 0 {
			written = *r.table
		}
	}
	sr.opts = "table=" + strconv.FormatUint(written, 10)
	if r.weight != nil {
		sr.opts += ",weight=" + strconv.FormatUint(*r.weight, 10)
	}
	if r.typ != "" {
		sr.opts += ",type=" + r.typ
	}
	if r.cwnd != nil {
		sr.cwnd = *r.cwnd
		sr.opts += ",cwnd=" + uitoa(*r.cwnd) + ",lock-cwnd=true"
	}
	if r.source != "" {
		src, err := parseIPAddr(r.source)
		if err != nil {
			return sr, invalid(join(r.path, "source"), "Invalid IP address %q", r.source)
		}
		if src.Is6() != sr.v6 || src.Is4In6() {
			return sr, unsupported(join(r.path, "source"), "source %s is not of the destination's address family", src)
		}
		sr.source = src.String()
		sr.opts += ",src=" + sr.source
	}
	return sr, nil
}

// sanitizeNetwork is nmstate's sanitize_ip_network: a bare address becomes
// a host route, host bits are cleared, the address is canonical.
func sanitizeNetwork(path, s string) (netip.Prefix, error) {
	ipText, prefix, hasPrefix := strings.Cut(s, "/")
	if strings.Contains(prefix, "/") {
		return netip.Prefix{}, invalid(path, "Invalid IP network string: '%s', expecting 'ip/prefix' or 'ip' format", s)
	}
	ip, err := parseIPAddr(ipText)
	if err != nil {
		return netip.Prefix{}, invalid(path, "Invalid IP network '%s'", s)
	}
	if ip.Is4In6() {
		return netip.Prefix{}, unsupported(path, "IPv4-mapped IPv6 destination %s is outside the supported subset", s)
	}
	bits := ip.BitLen()
	if hasPrefix {
		n, err := strconv.ParseUint(prefix, 10, 64)
		if err != nil || prefix == "" || prefix[0] == '+' {
			return netip.Prefix{}, invalid(path, "Invalid IP network prefix length '%s' in '%s'", prefix, s)
		}
		if n > uint64(ip.BitLen()) {
			return netip.Prefix{}, invalid(path, "Invalid IPv%d network prefix length '%s' in '%s', should be smaller than %d", map[bool]int{false: 4, true: 6}[ip.Is6()], prefix, s, ip.BitLen())
		}
		bits = int(n)
	}
	return netip.PrefixFrom(ip, bits).Masked(), nil
}

// checkRouteIface is nmstate's check of the next-hop interface of a desired
// route: absent or family-disabled interfaces are refused; an interface not
// in the desired state is not refused (its route is dropped later).
func checkRouteIface(r *route, sr sanitizedRoute, byName map[string]*iface) error {
	p := join(r.path, "next-hop-interface")
	if r.iface == "lo" && r.typ == "" {
		return unsupported(p, "routes via the loopback interface are outside the supported subset")
	}
	ifc, ok := byName[r.iface]
	if !ok {
		return nil
	}
	desc := routeText(r, sr)
	if ifc.state == "absent" {
		return invalid(p, "The next hop interface of desired Route '%s' has been marked as absent", desc)
	}
	if !ifc.ipEnabled(sr.v6) {
		return invalid(p, "The next hop interface of desired Route '%s' has been marked as IPv%d disabled", desc, map[bool]int{false: 4, true: 6}[sr.v6])
	}
	return nil
}

func routeText(r *route, sr sanitizedRoute) string {
	s := fmt.Sprintf("destination: %s next-hop-interface: %s", sr.dest, sr.iface)
	if sr.via != "" {
		s += " next-hop-address: " + sr.via
	}
	return s
}

// keyfileRoute renders route<i>: destination/prefix,gateway,metric.
func (sr sanitizedRoute) keyfileValue() string {
	return sr.dest + "," + sr.via + "," + strconv.FormatUint(sr.metric, 10)
}
