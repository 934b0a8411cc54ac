package nmstate

import (
	"net/netip"
	"strconv"

	"gopkg.in/yaml.v3"
)

// The interface kinds beyond ethernet/bond/bridge/vlan/dummy that gen_conf
// writes in full and NetworkManager loads (docs/nmstate.md): vrf, vxlan,
// veth, infiniband.

type vrfConf struct {
	table     uint64
	ports     []string
	portsPath string
}

type vxlanConf struct {
	path    string
	base    string
	id      uint64
	keys    map[string]string // [vxlan] key -> value besides id, parent
	hasID   bool
	hasBase bool
}

type ibConf struct {
	base string
	pkey uint64
	mode string
}

func parseVrf(path string, n *yaml.Node) (*vrfConf, error) {
	fs, err := mapping(path, n, []string{"route-table-id", "port", "ports"}, nil)
	if err != nil {
		return nil, err
	}
	v := &vrfConf{}
	hasTable := false
	for _, f := range fs {
		switch f.key {
		case "route-table-id":
			if v.table, err = unsigned(f.path, f.val, maxU32); err != nil {
				return nil, err
			}
			hasTable = true
		default:
			if v.ports, err = portNames(f.path, f.val); err != nil {
				return nil, err
			}
			v.portsPath = f.path
		}
	}
	if !hasTable || v.table == 0 || v.table == mainTable {
		return nil, unsupported(join(path, "route-table-id"), "a vrf needs a route-table-id other than 0 and 254")
	}
	return v, nil
}

func parseVxlan(path string, n *yaml.Node) (*vxlanConf, error) {
	fs, err := mapping(path, n, []string{"id", "base-iface", "local", "remote", "destination-port", "learning"}, nil)
	if err != nil {
		return nil, err
	}
	v := &vxlanConf{path: path, keys: map[string]string{}}
	for _, f := range fs {
		switch f.key {
		case "id":
			v.id, err = unsigned(f.path, f.val, 1<<24-1)
			v.hasID = true
		case "base-iface":
			v.base, err = str(f.path, f.val, maxTextLen, true)
			v.hasBase = true
		case "local", "remote":
			var s string
			if s, err = str(f.path, f.val, maxTextLen, true); err == nil {
				var ip netip.Addr
				if ip, err = parseIPAddr(s); err != nil {
					return nil, invalid(f.path, "invalid IP address syntax: %q", s)
				}
				v.keys[f.key] = ip.String()
			}
		case "destination-port":
			var p uint64
			p, err = unsigned(f.path, f.val, 1<<16-1)
			v.keys[f.key] = uitoa(p)
		case "learning":
			var b bool
			b, err = boolean(f.path, f.val)
			v.keys[f.key] = strconv.FormatBool(b)
		}
		if err != nil {
			return nil, err
		}
	}
	if !v.hasID {
		return nil, invalid(join(path, "id"), "missing field `id`")
	}
	if _, ok := v.keys["remote"]; !ok || !v.hasBase {
		return nil, unsupported(path, "a vxlan without base-iface and remote is outside the supported subset")
	}
	return v, nil
}

func parseVeth(path string, n *yaml.Node) (string, error) {
	fs, err := mapping(path, n, []string{"peer"}, nil)
	if err != nil {
		return "", err
	}
	for _, f := range fs {
		return str(f.path, f.val, maxTextLen, true)
	}
	return "", invalid(join(path, "peer"), "missing field `peer`")
}

func parseInfiniband(path string, n *yaml.Node) (*ibConf, error) {
	fs, err := mapping(path, n, []string{"base-iface", "mode", "pkey"}, nil)
	if err != nil {
		return nil, err
	}
	ib := &ibConf{}
	hasKey := false
	for _, f := range fs {
		switch f.key {
		case "base-iface":
			ib.base, err = str(f.path, f.val, maxTextLen, true)
		case "mode":
			if ib.mode, err = str(f.path, f.val, maxTextLen, true); err == nil && ib.mode != "datagram" && ib.mode != "connected" {
				err = invalid(f.path, "unknown variant `%s`, expected `datagram` or `connected`", ib.mode)
			}
		case "pkey":
			ib.pkey, err = unsigned(f.path, f.val, 1<<16-1)
			hasKey = true
		}
		if err != nil {
			return nil, err
		}
	}
	if ib.mode == "" || ib.base == "" || !hasKey || ib.pkey == 0xffff || ib.pkey == 0 {
		return nil, unsupported(path, "only an infiniband pkey child (base-iface, mode, pkey other than 0 and 0xffff) is supported")
	}
	return ib, nil
}

// kindSections adds the sections of the interface kinds in this file.
func (ifc *iface) kindSections() []*section {
	var s *section
	switch {
	case ifc.vrf != nil:
		s = newSection("vrf")
		s.set("table", uitoa(ifc.vrf.table))
	case ifc.vxlan != nil:
		s = newSection("vxlan")
		s.set("id", uitoa(ifc.vxlan.id))
		s.set("parent", ifc.vxlan.base)
		for k, v := range ifc.vxlan.keys {
			s.set(k, v)
		}
	case ifc.vethPeer != "":
		s = newSection("veth")
		s.set("peer", ifc.vethPeer)
	case ifc.ib != nil:
		s = newSection("infiniband")
		s.set("p-key", uitoa(ifc.ib.pkey))
		s.set("parent", ifc.ib.base)
		s.set("transport-mode", ifc.ib.mode)
		if ifc.mtu != nil {
			s.set("mtu", uitoa(*ifc.mtu))
		}
	default:
		return nil
	}
	return []*section{s}
}

// parentName is the interface a child kind is stacked on ("" for none).
func (ifc *iface) parentName() string {
	switch {
	case ifc.vlan != nil:
		return ifc.vlan.base
	case ifc.vxlan != nil:
		return ifc.vxlan.base
	case ifc.ib != nil:
		return ifc.ib.base
	}
	return ""
}
