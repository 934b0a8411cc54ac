package nmstate

import (
	"errors"
	"net/netip"
	"slices"

	"gopkg.in/yaml.v3"
)

func parseIP(path string, n *yaml.Node, v6 bool) (*ipConf, error) {
	known := []string{"enabled", "dhcp", "address"}
	for _, k := range ipOptKeys {
		if !slices.Contains(map[bool][]string{false: ipv6OnlyKeys, true: {"dhcp-client-id"}}[v6], k) {
			known = append(known, k)
		}
	}
	other := otherIPKeys
	if v6 {
		known = append(known, "autoconf")
	} else if !isNull(n) && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			switch n.Content[i].Value {
			case "autoconf", "dhcp-duid", "token", "addr-gen-mode":
				return nil, invalid(join(path, n.Content[i].Value), "Invalid YAML string: interfaces: %s is not allowed for IPv4", n.Content[i].Value)
			}
		}
	}
	if v6 && !isNull(n) && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			if n.Content[i].Value == "dhcp-client-id" {
				return nil, invalid(join(path, "dhcp-client-id"), "Invalid YAML string: interfaces: dhcp-client-id is not allowed for IPv6")
			}
		}
	}
	fs, err := mapping(path, n, known, other)
	if err != nil {
		return nil, err
	}
	ip := &ipConf{path: path}
	for _, f := range fs {
		switch f.key {
		case "enabled":
			ip.enabled, err = boolean(f.path, f.val)
		case "dhcp":
			ip.dhcp, err = boolean(f.path, f.val)
		case "autoconf":
			ip.autoconf, err = boolean(f.path, f.val)
		case "address":
			var items []*yaml.Node
			if items, err = sequence(f.path, f.val, MaxAddresses); err != nil {
				return nil, err
			}
			for i, it := range items {
				a, err := parseAddr(index(f.path, i), it)
				if err != nil {
					return nil, err
				}
				ip.addrs = append(ip.addrs, a)
			}
		default:
			err = parseIPOpt(ip, f)
		}
		if err != nil {
			return nil, err
		}
	}
	return ip, nil
}

func parseAddr(path string, n *yaml.Node) (ipAddr, error) {
	a := ipAddr{path: path}
	if isNull(n) {
		return a, invalid(path, "invalid type: expected a mapping")
	}
	fs, err := mapping(path, n, []string{"ip", "prefix-length"},
		[]string{"mptcp-flags", "valid-life-time", "valid-left", "valid-lft", "preferred-life-time", "preferred-left", "preferred-lft"})
	if err != nil {
		return a, err
	}
	var hasIP, hasPrefix bool
	for _, f := range fs {
		switch f.key {
		case "ip":
			if isNull(f.val) {
				return a, invalid(f.path, "invalid type: expected an IP address")
			}
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return a, err
			}
			if a.ip, err = parseIPAddr(s); err != nil {
				return a, invalid(f.path, "Invalid YAML string: interfaces: invalid IP address syntax: %q", s)
			}
			hasIP = true
		case "prefix-length":
			if isNull(f.val) {
				return a, invalid(f.path, "Required filed undefined")
			}
			// u8 in nmstate: anything larger fails to deserialise.
			if a.prefix, err = unsigned(f.path, f.val, 255); err != nil {
				return a, err
			}
			hasPrefix = true
		}
	}
	if !hasIP {
		return a, invalid(path, "Invalid YAML string: interfaces: missing field `ip`")
	}
	if !hasPrefix {
		return a, invalid(join(path, "prefix-length"), "Invalid YAML string: interfaces: missing field `prefix-length`")
	}
	return a, nil
}

// parseIPAddr accepts what Rust's IpAddr::from_str accepts: dotted quad
// without leading zeros, or IPv6 without a zone.
func parseIPAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return ip, err
	}
	if ip.Zone() != "" {
		return netip.Addr{}, errors.New("zone not allowed")
	}
	return ip, nil
}
