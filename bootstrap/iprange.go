package bootstrap

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"net/netip"
)

// addrRange is a validated Range: every address from start to end inside
// one IPv4 subnet, minus the ones the walk must never hand out.
type addrRange struct {
	start, end netip.Addr
	prefix     netip.Prefix
	skip       map[netip.Addr]string // address -> why (network, broadcast, gateway, excluded)
}

func parseRange(path string, r *Range) (*addrRange, error) {
	start, err := netip.ParseAddr(r.Start)
	if err != nil || !start.Unmap().Is4() {
		return nil, &ConfigError{Path: path + ".start", Reason: fmt.Sprintf("%q is not an IPv4 address (ranges are IPv4 only: duplicate detection uses ARP)", r.Start)}
	}
	end, err := netip.ParseAddr(r.End)
	if err != nil || !end.Unmap().Is4() {
		return nil, &ConfigError{Path: path + ".end", Reason: fmt.Sprintf("%q is not an IPv4 address", r.End)}
	}
	start, end = start.Unmap(), end.Unmap()
	if end.Less(start) {
		return nil, &ConfigError{Path: path + ".end", Reason: fmt.Sprintf("%s comes before start %s", end, start)}
	}
	if r.Prefix == 0 {
		return nil, &ConfigError{Path: path + ".prefix", Reason: "missing (the segment's prefix length, to skip its network and broadcast addresses)"}
	}
	if r.Prefix < 1 || r.Prefix > 32 {
		return nil, &ConfigError{Path: path + ".prefix", Reason: fmt.Sprintf("%d is not an IPv4 prefix length (1-32)", r.Prefix)}
	}
	pfx := netip.PrefixFrom(start, r.Prefix).Masked()
	if !pfx.Contains(end) {
		return nil, &ConfigError{Path: path + ".end", Reason: fmt.Sprintf("%s is outside %s, the subnet of start", end, pfx)}
	}
	if n := u32(end) - u32(start); n >= MaxRangeSize {
		return nil, &ConfigError{Path: path, Reason: fmt.Sprintf("%d addresses, more than the %d allowed", uint64(n)+1, MaxRangeSize)}
	}
	ar := &addrRange{start: start, end: end, prefix: pfx, skip: map[netip.Addr]string{}}
	// A /31 or /32 has no network or broadcast address (RFC 3021).
	if r.Prefix <= 30 {
		ar.skip[pfx.Addr()] = "network address"
		ar.skip[from32(u32(pfx.Addr())|^uint32(0)>>r.Prefix)] = "broadcast address"
	}
	if r.Gateway != "" {
		gw, err := netip.ParseAddr(r.Gateway)
		if err != nil || !gw.Unmap().Is4() || !pfx.Contains(gw.Unmap()) {
			return nil, &ConfigError{Path: path + ".gateway", Reason: fmt.Sprintf("%q is not an IPv4 address in %s", r.Gateway, pfx)}
		}
		ar.skip[gw.Unmap()] = "gateway"
	}
	for i, x := range r.Exclude {
		a, err := netip.ParseAddr(x)
		if err != nil || !a.Unmap().Is4() {
			return nil, &ConfigError{Path: fmt.Sprintf("%s.exclude[%d]", path, i), Reason: fmt.Sprintf("%q is not an IPv4 address", x)}
		}
		ar.skip[a.Unmap()] = "excluded"
	}
	if ar.usable() == 0 {
		return nil, &ConfigError{Path: path, Reason: "no usable address left after skipping network, broadcast, gateway and exclude"}
	}
	return ar, nil
}

// size counts the addresses from start to end, skipped ones included.
func (r *addrRange) size() uint32 { return u32(r.end) - u32(r.start) + 1 }

func (r *addrRange) usable() int {
	n := 0
	for range r.walk(0) {
		n++
	}
	return n
}

// walk yields every usable address once, beginning at start+offset (mod
// size) and wrapping around to start.
func (r *addrRange) walk(offset uint64) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		n := r.size()
		first := uint32(offset % uint64(n))
		for i := range n {
			a := from32(u32(r.start) + (first+i)%n)
			if _, skip := r.skip[a]; skip {
				continue
			}
			if !yield(a) {
				return
			}
		}
	}
}

// startOffset spreads machines booting one image over a range: it is a
// hash of the machine's identity, so the same machine starts at the same
// address every boot (and usually gets it back) while simultaneous boots
// of different machines start apart and rarely probe the same address.
func startOffset(identity string) uint64 {
	h := sha256.Sum256([]byte("nodereg-bootstrap\x00" + identity))
	return binary.BigEndian.Uint64(h[:8])
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func from32(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
