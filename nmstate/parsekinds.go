package nmstate

import "gopkg.in/yaml.v3"

var bondModes = map[string]string{
	"balance-rr": "balance-rr", "0": "balance-rr",
	"active-backup": "active-backup", "1": "active-backup",
	"balance-xor": "balance-xor", "2": "balance-xor",
	"broadcast": "broadcast", "3": "broadcast",
	"802.3ad": "802.3ad", "4": "802.3ad",
	"balance-tlb": "balance-tlb", "5": "balance-tlb",
	"balance-alb": "balance-alb", "6": "balance-alb",
}

func parseBond(path string, n *yaml.Node) (*bondConf, error) {
	fs, err := mapping(path, n, []string{"mode", "options", "port", "ports", "ports-config"}, nil)
	if err != nil {
		return nil, err
	}
	b := &bondConf{path: path, options: map[string]string{}}
	hasPorts := false
	for _, f := range fs {
		switch f.key {
		case "mode":
			s, err := numberOrString(f.path, f.val)
			if err != nil {
				return nil, err
			}
			if s == "unknown" {
				return nil, unsupported(f.path, "bond mode unknown is outside the supported subset")
			}
			m, ok := bondModes[s]
			if !ok {
				return nil, invalid(f.path, "unknown variant `%s`, expected one of `balance-rr`, `active-backup`, `balance-xor`, `broadcast`, `802.3ad`, `balance-tlb`, `balance-alb`", s)
			}
			b.mode = m
		case "options":
			b.optsPath = f.path
			opts, err := mapping(f.path, f.val, bondOptionKeys, otherBondOptions)
			if err != nil {
				return nil, err
			}
			for _, o := range opts {
				if err := parseBondOption(b, o); err != nil {
					return nil, err
				}
			}
		case "port", "ports":
			// serde's alias: both spellings fill the same field.
			if hasPorts {
				return nil, invalid(f.path, "duplicate field `port`")
			}
			hasPorts = true
			if b.ports, err = portNames(f.path, f.val); err != nil {
				return nil, err
			}
			b.portsPath = f.path
		case "ports-config":
			if err := parsePortsConfig(b, f); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// portNames reads a bond port list (names).
func portNames(path string, n *yaml.Node) ([]string, error) {
	items, err := sequence(path, n, MaxPorts)
	if err != nil {
		return nil, err
	}
	var names []string
	for i, it := range items {
		name, err := str(index(path, i), it, maxTextLen, true)
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

func parseBridge(path string, n *yaml.Node) (*bridgeConf, error) {
	fs, err := mapping(path, n, []string{"options", "port", "ports"}, nil)
	if err != nil {
		return nil, err
	}
	br := &bridgeConf{path: path, options: map[string]string{}}
	for _, f := range fs {
		switch f.key {
		case "options":
			if err := parseBridgeOptions(br, f); err != nil {
				return nil, err
			}
		case "port", "ports":
			// serde's alias, as for bonds.
			if br.portsGiven {
				return nil, invalid(f.path, "duplicate field `port`")
			}
			br.portsGiven = true
			br.portsPath = f.path
			items, err := sequence(f.path, f.val, MaxPorts)
			if err != nil {
				return nil, err
			}
			for i, it := range items {
				bp, err := parseBridgePort(index(f.path, i), it)
				if err != nil {
					return nil, err
				}
				br.ports = append(br.ports, bp.name)
				br.portConf = append(br.portConf, bp)
			}
		}
	}
	return br, nil
}

func parseVlan(path string, n *yaml.Node) (*vlanConf, error) {
	fs, err := mapping(path, n, []string{"base-iface", "id", "protocol", "registration-protocol", "reorder-headers", "loose-binding"}, nil)
	if err != nil {
		return nil, err
	}
	// vlan.flags: reorder-headers 1 (on unless false), gvrp 2,
	// loose-binding 4, mvrp 8 (settings/vlan.rs).
	v := &vlanConf{path: path, flags: 1}
	hasID := false
	for _, f := range fs {
		switch f.key {
		case "base-iface":
			if v.base, err = str(f.path, f.val, maxTextLen, true); err != nil {
				return nil, err
			}
			v.hasBase = true
		case "id":
			if v.id, err = unsigned(f.path, f.val, 1<<16-1); err != nil {
				return nil, err
			}
			hasID = true
		case "protocol":
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return nil, err
			}
			if s != "802.1q" && s != "802.1ad" {
				return nil, invalid(f.path, "unknown variant `%s`, expected `802.1q` or `802.1ad`", s)
			}
			v.protocol = s
		case "reorder-headers", "loose-binding":
			b, err := boolean(f.path, f.val)
			if err != nil {
				return nil, err
			}
			bit := map[string]uint64{"reorder-headers": 1, "loose-binding": 4}[f.key]
			v.flags &^= bit
			if b {
				v.flags |= bit
			}
		case "registration-protocol":
			s, err := str(f.path, f.val, maxTextLen, true)
			if err != nil {
				return nil, err
			}
			switch s {
			case "gvrp":
				v.flags |= 2
			case "mvrp":
				v.flags |= 8
			case "none":
			default:
				return nil, invalid(f.path, "unknown variant `%s`, expected one of `gvrp`, `mvrp`, `none`", s)
			}
		}
	}
	if !hasID {
		return nil, invalid(join(path, "id"), "missing field `id`")
	}
	return v, nil
}
