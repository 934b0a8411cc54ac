package netpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// MatchWildcard: a [match] value with a glob or a negation, which
	// binds the profile to devices by pattern instead of by name.
	MatchWildcard Rule = "match-wildcard"
)

// Bounds is refused always: a value outside the bound the policy sets.
const Bounds Rule = "bounds"

// ipMethods are the ipv4/ipv6 methods a server may set; shared needs its
// own rule, anything else is unknown.
var ipMethods = []string{"manual", "auto", "dhcp", "link-local", "disabled", "ignore"}

// MaxAutoconnectPriority bounds connection.autoconnect-priority: at most
// the default every image profile has, so that a server profile never
// wins a device from one at boot by priority alone. NetworkManager's own
// range is -999..999.
const (
	MaxAutoconnectPriority = 0
	minAutoconnectPriority = -999
)

// checkAllowedKey applies the per-key allowlist of an allowed section to
// key = v (unescaped).
func (p Policy) checkAllowedKey(path, sec, key, v string) error {
	switch {
	case (sec == "ipv4" || sec == "ipv6") && key == "method":
		switch {
		case v == "shared":
			return p.refuse(path, Shared, "shares the node's connection: NetworkManager starts a DHCP and DNS server, NAT and forwarding")
		case !slices.Contains(ipMethods, v):
			return p.refuse(path, Unknown, "method %q is not one the network policy knows (%s)", v, strings.Join(ipMethods, ", "))
		}
	case sec == "connection" && key == "zone" && v != "":
		return p.refuse(path, Zone, "puts the interface in firewall zone %q", v)
	case sec == "connection" && key == "autoconnect-priority":
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < minAutoconnectPriority || n > MaxAutoconnectPriority {
			return &Refusal{Path: path, Rule: Bounds, Reason: fmt.Sprintf("%q is not an integer from %d to %d: a higher priority would win a device from the image's own profiles at boot", v, minAutoconnectPriority, MaxAutoconnectPriority)}
		}
	case sec == "match":
		// A keyfile list: ';'-separated; nmcli also takes ',' and blanks.
		for _, item := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(";, \t", r) }) {
			if wildcard(item) {
				return p.refuse(path, MatchWildcard, "%q matches devices by pattern or by exclusion, not by name", strings.TrimSpace(item))
			}
		}
	}
	return nil
}

// wildcard: a match item NetworkManager reads as a pattern (a glob, or a
// "!" negation, after an optional "~" or "&" prefix).
func wildcard(item string) bool {
	item = strings.TrimLeft(strings.TrimSpace(item), "~&")
	return strings.HasPrefix(item, "!") || strings.ContainsAny(item, "*?[")
}
