package state

import (
	"maps"
	"slices"
	"strings"
)

// FormatAddresses encodes addresses per interface (CIDR) as the state
// file and the report-back annotation hold them:
// "eth0=10.0.0.5/24,fd00::5/64;eth1=…", sorted by interface.
func FormatAddresses(m map[string][]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strings.Join(m[k], ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// ParseAddresses decodes FormatAddresses' encoding; a part without an
// interface name is skipped.
func ParseAddresses(s string) map[string][]string {
	out := map[string][]string{}
	for _, part := range strings.Split(s, ";") {
		name, list, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			continue
		}
		for _, a := range strings.Split(list, ",") {
			if a != "" {
				out[name] = append(out[name], a)
			}
		}
	}
	return out
}
