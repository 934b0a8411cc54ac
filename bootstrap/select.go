package bootstrap

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodereg/nodereg/internal/errclass"
)

// NoMatchError says no static entry names this machine and no range
// stands in for the static table.
type NoMatchError struct {
	Placeholder string
	Entries     int
	Facts       Facts
}

// Class: the admin's bootstrap table must change (docs/bootstrap.md).
func (e *NoMatchError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *NoMatchError) Cause() string { return "bootstrap network config" }

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("%s.ipAddresses.%s: none of the %d static entries matches this machine (looked for %s) and no range is given",
		Key, e.Placeholder, e.Entries, e.Facts)
}

// AmbiguousError says two static entries match this machine with different
// addresses (say one by MAC and one by UUID): the agent will not guess.
type AmbiguousError struct {
	Placeholder string
	First       int // index in static
	Second      int
}

// Class: the admin's bootstrap table must change (docs/bootstrap.md).
func (e *AmbiguousError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *AmbiguousError) Cause() string { return "bootstrap network config" }

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s.ipAddresses.%s: static[%d] and static[%d] both match this machine with different addresses",
		Key, e.Placeholder, e.First, e.Second)
}

// selectStatic finds the static entry of this machine; ok is false when
// none matches.
func selectStatic(p *placeholder, f Facts) (addr netip.Addr, index int, ok bool, err error) {
	index = -1
	for i, e := range p.static {
		var hit bool
		switch e.kind {
		case "mac":
			hit = slices.Contains(f.MACs, e.value)
		case "serial":
			hit = f.Serial != "" && f.Serial == e.value
		case "uuid":
			hit = f.UUID != "" && f.UUID == e.value
		}
		if !hit {
			continue
		}
		if index >= 0 && e.addr != addr {
			return netip.Addr{}, 0, false, &AmbiguousError{Placeholder: p.name, First: index, Second: i}
		}
		if index < 0 {
			addr, index = e.addr, i
		}
	}
	return addr, index, index >= 0, nil
}
