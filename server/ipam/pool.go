// Package ipam holds address pools shaped like the CAPI in-cluster provider's
// InClusterIPPool and its lowest-free allocation (docs/regserver.md, Addresses).
// It keeps no claims itself: callers pass the set of addresses in use, so the
// one place that persists claims stays the single source of truth.
package ipam

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// Spec is a pool as written in the config file.
type Spec struct {
	Name              string   `yaml:"name" json:"name"`
	Addresses         []string `yaml:"addresses" json:"addresses"`
	Prefix            int      `yaml:"prefix" json:"prefix"`
	Gateway           string   `yaml:"gateway,omitempty" json:"gateway,omitempty"`
	ExcludedAddresses []string `yaml:"excludedAddresses,omitempty" json:"excludedAddresses,omitempty"`
	// AllocateReservedIPAddresses lets the subnet's network (and IPv4
	// broadcast) address be handed out, as the provider's flag of that name.
	AllocateReservedIPAddresses bool `yaml:"allocateReservedIPAddresses,omitempty" json:"allocateReservedIPAddresses,omitempty"`
}

// Range is an inclusive address range of one family.
type Range struct {
	First, Last netip.Addr
}

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// Pool is a validated pool: its allocatable addresses as sorted, disjoint
// ranges, with excluded, reserved and gateway addresses already removed.
type Pool struct {
	Name    string
	Prefix  int
	Gateway netip.Addr // invalid when the pool has none
	subnet  netip.Prefix
	ranges  []Range
}

// ErrExhausted is returned by Allocate when no address is free.
var ErrExhausted = errors.New("no address available")

// New validates s the way the provider's webhook does: every entry parses,
// one IP family throughout, the prefix fits the family, and every address
// lies in the subnet of the lowest address and the prefix. Stricter than
// the webhook, the gateway must lie in that subnet too: a gateway a host
// cannot reach on-link is a typo, and one inside another pool's range
// could be handed out there.
func New(s Spec) (*Pool, error) {
	if s.Name == "" {
		return nil, errors.New("name: empty")
	}
	if len(s.Addresses) == 0 {
		return nil, errors.New("addresses: empty")
	}
	var ranges []Range
	for i, a := range s.Addresses {
		r, err := ParseRange(a)
		if err != nil {
			return nil, fmt.Errorf("addresses[%d]: %w", i, err)
		}
		ranges = append(ranges, r)
	}
	is4 := ranges[0].First.Is4()
	bits := 128
	if is4 {
		bits = 32
	}
	for i, r := range ranges {
		if r.First.Is4() != is4 {
			return nil, fmt.Errorf("addresses[%d]: %q mixes IPv4 and IPv6", i, s.Addresses[i])
		}
	}
	if s.Prefix < 0 || s.Prefix > bits {
		return nil, fmt.Errorf("prefix: %d out of range 0..%d", s.Prefix, bits)
	}
	p := &Pool{Name: s.Name, Prefix: s.Prefix}
	ranges = normalize(ranges)
	subnet, err := ranges[0].First.Prefix(s.Prefix)
	if err != nil {
		return nil, fmt.Errorf("prefix: %w", err)
	}
	p.subnet = subnet
	for i, a := range s.Addresses {
		r, _ := ParseRange(a)
		if !subnet.Contains(r.First) || !subnet.Contains(r.Last) {
			return nil, fmt.Errorf("addresses[%d]: %q is outside subnet %s (lowest address and prefix)", i, a, subnet)
		}
	}
	if s.Gateway != "" {
		gw, err := netip.ParseAddr(s.Gateway)
		if err != nil {
			return nil, fmt.Errorf("gateway: %q is not an IP address", s.Gateway)
		}
		gw = gw.Unmap()
		if gw.Is4() != is4 {
			return nil, fmt.Errorf("gateway: %q is not of the pool's IP family", s.Gateway)
		}
		if gw.Zone() != "" {
			return nil, fmt.Errorf("gateway: %q has a zone", s.Gateway)
		}
		if !subnet.Contains(gw) {
			return nil, fmt.Errorf("gateway: %q is outside subnet %s (lowest address and prefix)", s.Gateway, subnet.Masked())
		}
		p.Gateway = gw
		ranges = subtract(ranges, Range{gw, gw})
	}
	for i, e := range s.ExcludedAddresses {
		r, err := ParseRange(e)
		if err != nil {
			return nil, fmt.Errorf("excludedAddresses[%d]: %w", i, err)
		}
		if r.First.Is4() != is4 {
			return nil, fmt.Errorf("excludedAddresses[%d]: %q is not of the pool's IP family", i, e)
		}
		ranges = subtract(ranges, r)
	}
	if !s.AllocateReservedIPAddresses {
		network := subnet.Masked().Addr()
		ranges = subtract(ranges, Range{network, network})
		if is4 {
			bc := lastOf(subnet)
			ranges = subtract(ranges, Range{bc, bc})
		}
	}
	p.ranges = ranges
	return p, nil
}

// ParseRange parses a single address, an `a-b` range or a CIDR.
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.Contains(s, "/"):
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		if pfx.Addr().Is4In6() || pfx.Addr().Zone() != "" {
			return Range{}, fmt.Errorf("%q: write IPv4 CIDRs without the ::ffff: mapping and without a zone", s)
		}
		pfx = pfx.Masked()
		return Range{pfx.Addr(), lastOf(pfx)}, nil
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		first, err := parseAddr(strings.TrimSpace(a))
		if err != nil {
			return Range{}, fmt.Errorf("range %q: %w", s, err)
		}
		last, err := parseAddr(strings.TrimSpace(b))
		if err != nil {
			return Range{}, fmt.Errorf("range %q: %w", s, err)
		}
		if first.Is4() != last.Is4() {
			return Range{}, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
		}
		if last.Less(first) {
			return Range{}, fmt.Errorf("range %q ends before it starts", s)
		}
		return Range{first, last}, nil
	default:
		a, err := parseAddr(s)
		if err != nil {
			return Range{}, err
		}
		return Range{a, a}, nil
	}
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q has a zone", s)
	}
	// An IPv4-mapped IPv6 address is an IPv4 address for allocation.
	return a.Unmap(), nil
}

// lastOf is the highest address of a masked prefix.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// normalize sorts ranges and merges overlapping or adjacent ones.
func normalize(rs []Range) []Range {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Range) int { return a.First.Compare(b.First) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if r.First.Compare(prev.Last) <= 0 || r.First == prev.Last.Next() {
				if prev.Last.Less(r.Last) {
					prev.Last = r.Last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// subtract removes x from the sorted, disjoint ranges rs.
func subtract(rs []Range, x Range) []Range {
	var out []Range
	for _, r := range rs {
		if x.Last.Less(r.First) || r.Last.Less(x.First) {
			out = append(out, r)
			continue
		}
		if r.First.Less(x.First) {
			out = append(out, Range{r.First, x.First.Prev()})
		}
		if x.Last.Less(r.Last) {
			out = append(out, Range{x.Last.Next(), r.Last})
		}
	}
	return out
}

// Ranges returns the allocatable ranges in ascending order.
func (p *Pool) Ranges() []Range { return slices.Clone(p.ranges) }

// Is4 reports whether the pool is IPv4.
func (p *Pool) Is4() bool { return len(p.ranges) > 0 && p.ranges[0].First.Is4() }

// Contains reports whether a is allocatable from the pool.
func (p *Pool) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, r := range p.ranges {
		if r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 {
			return true
		}
	}
	return false
}

// Total is the number of allocatable addresses, saturating at MaxUint64
// (an IPv6 /64 holds more).
func (p *Pool) Total() uint64 {
	var total uint64
	for _, r := range p.ranges {
		n, ok := span(r)
		if !ok || total > math.MaxUint64-n {
			return math.MaxUint64
		}
		total += n
	}
	return total
}

// span is Last-First+1, ok false when it does not fit 64 bits.
func span(r Range) (uint64, bool) {
	a, b := r.First.As16(), r.Last.As16()
	var hi, lo [8]byte
	borrow := 0
	var d [16]byte
	for i := 15; i >= 0; i-- {
		v := int(b[i]) - int(a[i]) - borrow
		borrow = 0
		if v < 0 {
			v += 256
			borrow = 1
		}
		d[i] = byte(v)
	}
	copy(hi[:], d[:8])
	copy(lo[:], d[8:])
	if hi != [8]byte{} {
		return 0, false
	}
	var n uint64
	for _, x := range lo {
		n = n<<8 | uint64(x)
	}
	if n == math.MaxUint64 {
		return 0, false
	}
	return n + 1, true
}

// Subnet is the pool's subnet: its lowest address masked to the prefix.
func (p *Pool) Subnet() netip.Prefix { return p.subnet }

// Overlap returns the lowest address both pools could hand out, or one
// pool's gateway that the other could hand out; ok is false when neither
// exists. Two pools sharing an address would give it to two machines.
func Overlap(a, b *Pool) (addr netip.Addr, ok bool) {
	var first netip.Addr
	consider := func(x netip.Addr) {
		if !first.IsValid() || x.Less(first) {
			first = x
		}
	}
	for _, ra := range a.ranges {
		for _, rb := range b.ranges {
			lo, hi := ra.First, ra.Last
			if lo.Less(rb.First) {
				lo = rb.First
			}
			if rb.Last.Less(hi) {
				hi = rb.Last
			}
			if lo.Compare(hi) <= 0 {
				consider(lo)
			}
		}
	}
	if a.Gateway.IsValid() && b.Contains(a.Gateway) {
		consider(a.Gateway)
	}
	if b.Gateway.IsValid() && a.Contains(b.Gateway) {
		consider(b.Gateway)
	}
	return first, first.IsValid()
}

// Allocate returns the lowest allocatable address for which inUse is
// false. inUse may know addresses outside the pool (the server keeps one
// registry for all pools); they cost nothing here.
func (p *Pool) Allocate(inUse func(netip.Addr) bool) (netip.Addr, error) {
	for _, r := range p.ranges {
		// Each step past First skips one used address, so the walk ends
		// within (addresses in use)+1 steps even in an IPv6 /64.
		for a := r.First; ; a = a.Next() {
			if !inUse(a) {
				return a, nil
			}
			if a == r.Last {
				break
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("pool %q: %w", p.Name, ErrExhausted)
}

// AllocateFrom is Allocate for a caller that knows every allocatable
// address below from is in use (an allocation cursor): the walk starts at
// from, so the lowest free address costs no walk over the addresses
// handed out before it. An invalid from starts at the beginning.
func (p *Pool) AllocateFrom(from netip.Addr, inUse func(netip.Addr) bool) (netip.Addr, error) {
	for _, r := range p.ranges {
		a := r.First
		if from.IsValid() {
			if r.Last.Less(from) {
				continue
			}
			if a.Less(from) {
				a = from
			}
		}
		for ; ; a = a.Next() {
			if !inUse(a) {
				return a, nil
			}
			if a == r.Last {
				break
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("pool %q: %w", p.Name, ErrExhausted)
}
