package netpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/keyfile"
)

// Opt-in rules for keys inside allowed sections (docs/reliability.md,
// "Network-config policy"): each turns a profile from configuring an
// interface into changing what the node is on the network.
const (
	// Shared: ipv4.method or ipv6.method shared (NetworkManager starts
	// dnsmasq, NAT and forwarding on the interface).
	Shared Rule = "shared"
	// Zone: connection.zone (the interface's firewall zone).
	Zone Rule = "zone"
	// MatchWildcard: a [match] value with a glob or a negation, or a list
	// of several interface names, which binds the profile to devices by
	// pattern instead of by one name.
	MatchWildcard Rule = "match-wildcard"
)

// Bounds is refused always: a value outside the bound the policy sets.
const Bounds Rule = "bounds"

// ipMethods are the ipv4 and ipv6 methods a server may set, of those
// NetworkManager takes for each family (dhcp and ignore are IPv6's only);
// shared needs its own rule, anything else is unknown.
var ipMethods = map[string][]string{
	"ipv4": {"manual", "auto", "link-local", "disabled"},
	"ipv6": {"manual", "auto", "dhcp", "link-local", "disabled", "ignore"},
}

// MaxAutoconnectPriority bounds connection.autoconnect-priority: at most
// the default every image profile has, so that a server profile never
// wins a device from one at boot by priority alone. NetworkManager's own
// range is -999..999.
const (
	MaxAutoconnectPriority = 0
	minAutoconnectPriority = -999
)

// checkAllowedKey applies the per-key allowlist of an allowed section to
// key = raw (v: unescaped). [match] is judged as a whole (checkMatch).
func (p Policy) checkAllowedKey(path, sec, key, raw, v string) error {
	switch {
	case (sec == "ipv4" || sec == "ipv6") && key == "method":
		switch {
		case v == "shared":
			return p.refuse(path, Shared, "shares the node's connection: NetworkManager starts a DHCP and DNS server, NAT and forwarding")
		case !slices.Contains(ipMethods[sec], v):
			return p.refuse(path, Unknown, "method %q is not one the network policy knows for %s (%s)", v, sec, strings.Join(ipMethods[sec], ", "))
		}
	case sec == "connection" && key == "zone" && v != "":
		return p.refuse(path, Zone, "puts the interface in firewall zone %q", v)
	case sec == "connection" && key == "autoconnect-priority":
		// NetworkManager reads the raw value (no escapes) as C's strtoll
		// with base 0 does (010 is 8): only a plain decimal reads the same
		// everywhere.
		n, ok := keyfile.DecimalInt(raw)
		if !ok || n < minAutoconnectPriority || n > MaxAutoconnectPriority {
			return &Refusal{Path: path, Rule: Bounds, Reason: fmt.Sprintf("%q is not a plain decimal integer from %d to %d: a higher priority would win a device from the image's own profiles at boot", raw, minAutoconnectPriority, MaxAutoconnectPriority)}
		}
	}
	return nil
}
