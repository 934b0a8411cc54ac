package nmstate

import "gopkg.in/yaml.v3"

func parseRoute(path string, n *yaml.Node) (*route, error) {
	if isNull(n) {
		return nil, invalid(path, "invalid type: expected a mapping")
	}
	fs, err := mapping(path, n, []string{"state", "destination", "next-hop-interface", "next-hop-address", "metric", "table-id", "weight",
		"route-type", "cwnd", "source"}, nil)
	if err != nil {
		return nil, err
	}
	r := &route{path: path}
	for _, f := range fs {
		switch f.key {
		case "state":
			s, err := str(f.path, f.val, maxTextLen, false)
			if err != nil {
				return nil, err
			}
			if s != "absent" {
				return nil, invalid(f.path, "unknown variant `%s`, expected `absent`", s)
			}
			r.absent = true
		case "destination":
			r.dest, err = str(f.path, f.val, maxTextLen, false)
			r.hasDest = true
		case "next-hop-interface":
			r.iface, err = str(f.path, f.val, maxTextLen, false)
			r.hasIface = true
		case "next-hop-address":
			r.via, err = str(f.path, f.val, maxTextLen, false)
			r.hasVia = true
		case "metric":
			r.metric, err = optional(signed(f.path, f.val))
		case "table-id":
			r.table, err = optional(unsigned(f.path, f.val, maxU32))
		case "weight":
			r.weight, err = optional(unsigned(f.path, f.val, 1<<16-1))
		case "cwnd":
			r.cwnd, err = optional(unsigned(f.path, f.val, maxU32))
		case "source":
			r.source, err = str(f.path, f.val, maxTextLen, false)
		case "route-type":
			if r.typ, err = str(f.path, f.val, maxTextLen, false); err == nil {
				switch r.typ {
				case "blackhole", "prohibit", "unreachable":
				default:
					err = invalid(f.path, "unknown variant `%s`, expected one of `blackhole`, `prohibit`, `unreachable`", r.typ)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

func parseDNS(path string, n *yaml.Node) (*dnsConfig, error) {
	fs, err := mapping(path, n, []string{"server", "search", "options"}, nil)
	if err != nil {
		return nil, err
	}
	d := &dnsConfig{path: path}
	for _, f := range fs {
		max := MaxDNSServers
		if f.key != "server" {
			max = MaxDNSSearches
		}
		items, err := sequence(f.path, f.val, max)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			p := index(f.path, i)
			s, err := str(p, it, maxTextLen, false)
			if err != nil {
				return nil, err
			}
			switch f.key {
			case "server":
				d.servers = append(d.servers, s)
				d.srvPaths = append(d.srvPaths, p)
			case "search":
				d.search = append(d.search, s)
			case "options":
				if err := checkDNSOption(p, s); err != nil {
					return nil, err
				}
				d.options = append(d.options, s)
			}
		}
	}
	return d, nil
}
