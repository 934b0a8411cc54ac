package nmstate

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// parse reads the desired state. It checks shapes and syntax (what nmstate's
// deserialiser checks); meaning is checked by validate.
func parse(desired []byte) (*state, error) {
	if len(desired) > MaxInputBytes {
		return nil, unsupported("", "desired state larger than %d bytes", MaxInputBytes)
	}
	// nmstatectl replaces no-break spaces before parsing (cli/state.rs).
	desired = bytes.ReplaceAll(desired, []byte("\u00a0"), []byte(" "))
	dec := yaml.NewDecoder(bytes.NewReader(desired))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &state{}, nil
		}
		return nil, invalid("", "Invalid YAML string: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, unsupported("", "more than one YAML document")
	}
	st := &state{}
	if len(doc.Content) == 0 {
		return st, nil
	}
	top, err := mapping("", doc.Content[0], []string{"interfaces", "routes", "route-rules", "dns-resolver"}, otherTopKeys)
	if err != nil {
		return nil, err
	}
	for _, f := range top {
		if err := st.parseTop(f); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// parseTop reads one top-level key of the state into st.
func (st *state) parseTop(f field) error {
	switch f.key {
	case "interfaces":
		items, err := sequence(f.path, f.val, MaxInterfaces)
		if err != nil {
			return err
		}
		for i, it := range items {
			ifc, err := parseIface(index(f.path, i), it)
			if err != nil {
				return err
			}
			st.ifaces = append(st.ifaces, ifc)
		}
	case "routes":
		return configList(f, []string{"running"}, MaxRoutes, func(path string, n *yaml.Node) error {
			r, err := parseRoute(path, n)
			st.routes = append(st.routes, r)
			return err
		})
	case "route-rules":
		return configList(f, nil, MaxRouteRules, func(path string, n *yaml.Node) error {
			r, err := parseRule(path, n)
			st.rules = append(st.rules, r)
			return err
		})
	case "dns-resolver":
		fs, err := mapping(f.path, f.val, []string{"config"}, []string{"running"})
		if err != nil {
			return err
		}
		for _, c := range fs {
			if st.dns, err = parseDNS(c.path, c.val); err != nil {
				return err
			}
		}
	}
	return nil
}

// configList reads f's config list (at most max entries), each through
// each; other lists f names are outside the subset.
func configList(f field, other []string, max int, each func(path string, n *yaml.Node) error) error {
	fs, err := mapping(f.path, f.val, []string{"config"}, other)
	if err != nil {
		return err
	}
	for _, c := range fs {
		items, err := sequence(c.path, c.val, max)
		if err != nil {
			return err
		}
		for i, it := range items {
			if err := each(index(c.path, i), it); err != nil {
				return err
			}
		}
	}
	return nil
}

var ifaceKeys = append([]string{"name", "type", "state", "mtu", "mac-address", "description", "ipv4", "ipv6",
	"link-aggregation", "bridge", "vlan", "vrf", "vxlan", "veth", "infiniband", "copy-mac-from"}, ifaceOptKeys...)

func parseIface(path string, n *yaml.Node) (*iface, error) {
	fs, err := ifaceFields(path, n)
	if err != nil {
		return nil, err
	}
	ifc := &iface{path: path, typ: "ethernet", state: "up"}
	hasName := false
	for _, f := range fs {
		if f.key == "name" {
			hasName = true
		}
		if err := ifc.parseIdentity(f); err != nil {
			return nil, err
		}
	}
	if !hasName {
		return nil, invalid(path, "missing field `name`")
	}
	for _, f := range fs {
		if err := ifc.parseField(f); err != nil {
			return nil, err
		}
	}
	return ifc, nil
}

// ifaceFields are the fields of an interface nmstate reads: a type outside
// the subset is refused at its key before its own keys (mac-vlan:,
// libreswan:, patch: ...) are read, and of an absent interface nmstate
// keeps only name, type and state and drops the rest unread (iface.rs,
// Deserialize for Interface).
func ifaceFields(path string, n *yaml.Node) ([]field, error) {
	if err := checkNode(path, n); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, invalid(path, "invalid type: expected a mapping")
	}
	if tf, err := someFields(path, n, "type"); err == nil && len(tf) == 1 && tf[0].val.Kind == yaml.ScalarNode {
		if t := tf[0].val.Value; slices.Contains(otherTypes, t) {
			return nil, unsupported(tf[0].path, "interface type %q is outside the supported subset (%s)", t, strings.Join(supportedTypes, ", "))
		}
	}
	if isAbsent(n) {
		return someFields(path, n, "name", "type", "state")
	}
	return mapping(path, n, ifaceKeys, otherIfaceKeys)
}

// parseIdentity reads name, type and state, which the other fields
// depend on; other fields are left to parseField.
func (ifc *iface) parseIdentity(f field) error {
	var err error
	switch f.key {
	case "name":
		ifc.name, err = str(f.path, f.val, maxTextLen, true)
	case "type":
		var t string
		if t, err = str(f.path, f.val, maxTextLen, true); err == nil {
			if !slices.Contains(supportedTypes, t) {
				return unsupported(f.path, "unknown interface type %q", t)
			}
			ifc.typ = t
		}
	case "state":
		var s string
		if s, err = str(f.path, f.val, maxTextLen, true); err != nil {
			return err
		}
		switch s {
		case "up", "down", "absent":
			ifc.state = s
		case "unknown", "ignore":
			return unsupported(f.path, "state %q is outside the supported subset (up, down, absent)", s)
		default:
			return invalid(f.path, "unknown variant `%s`, expected one of `up`, `down`, `absent`, `unknown`, `ignore`", s)
		}
	}
	return err
}

// parseField reads one field other than name, type and state.
func (ifc *iface) parseField(f field) error {
	var err error
	switch f.key {
	case "mtu":
		ifc.mtu, err = optional(unsigned(f.path, f.val, 1<<64-1))
	case "mac-address":
		ifc.mac, err = str(f.path, f.val, maxTextLen, true)
	case "description":
		ifc.desc, err = optional(str(f.path, f.val, maxDescriptionLen, true))
	case "ipv4":
		ifc.ipv4, err = parseIP(f.path, f.val, false)
	case "ipv6":
		ifc.ipv6, err = parseIP(f.path, f.val, true)
	case "profile-name", "identifier", "wait-ip", "lldp", "accept-all-mac-addresses", "ethernet", "ethtool", "mptcp":
		err = parseIfaceOpt(ifc, f)
	case "copy-mac-from":
		ifc.copyMAC, err = str(f.path, f.val, maxTextLen, true)
		ifc.copyMACPath = f.path
	default:
		if k, ok := kindKeys[f.key]; ok {
			if ifc.typ != k.typ {
				return unsupported(f.path, "%s is only read for type %s", f.key, k.typ)
			}
			err = k.read(ifc, f)
		}
	}
	return err
}

// kindKeys are the keys of the interfaces' own kinds (bond, bridge, ...):
// the one type each is read for, and how.
var kindKeys = map[string]struct {
	typ  string
	read func(ifc *iface, f field) error
}{
	"link-aggregation": {"bond", func(ifc *iface, f field) error { return readInto(&ifc.bond, parseBond, f) }},
	"bridge":           {"linux-bridge", func(ifc *iface, f field) error { return readInto(&ifc.br, parseBridge, f) }},
	"vlan":             {"vlan", func(ifc *iface, f field) error { return readInto(&ifc.vlan, parseVlan, f) }},
	"vrf":              {"vrf", func(ifc *iface, f field) error { return readInto(&ifc.vrf, parseVrf, f) }},
	"vxlan":            {"vxlan", func(ifc *iface, f field) error { return readInto(&ifc.vxlan, parseVxlan, f) }},
	"veth": {"veth", func(ifc *iface, f field) error {
		ifc.uuidType = "ethernet"
		return readInto(&ifc.vethPeer, parseVeth, f)
	}},
	"infiniband": {"infiniband", func(ifc *iface, f field) error { return readInto(&ifc.ib, parseInfiniband, f) }},
}

// readInto stores in *dst what read makes of the field's value.
func readInto[T any](dst *T, read func(path string, n *yaml.Node) (T, error), f field) (err error) {
	*dst, err = read(f.path, f.val)
	return err
}

// optional is the address of a value read for a key whose absence differs
// from its zero value (mtu, a route's metric); nil with the error.
func optional[T any](v T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }

// numberOrString is nmstate's NumberAsString: an integer (written in
// decimal) or text; enum values like bond modes accept both.
func numberOrString(path string, n *yaml.Node) (string, error) {
	if n.Kind == yaml.ScalarNode && n.Style == 0 && untagged(n.Value) == "int" {
		m, neg, err := plainInt(n.Value)
		if err != nil {
			return "", invalid(path, "invalid integer %q", n.Value)
		}
		if neg {
			return "-" + uitoa(m), nil
		}
		return uitoa(m), nil
	}
	return str(path, n, maxTextLen, true)
}

func isAbsent(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "state" && n.Content[i+1].Kind == yaml.ScalarNode && n.Content[i+1].Value == "absent" {
			return true
		}
	}
	return false
}

// someFields returns the named fields of a mapping and ignores the others.
func someFields(path string, n *yaml.Node, keys ...string) ([]field, error) {
	var out []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !slices.Contains(keys, k.Value) {
			continue
		}
		p := join(path, k.Value)
		if err := checkNode(p, v); err != nil {
			return nil, err
		}
		out = append(out, field{key: k.Value, val: v, path: p})
	}
	return out, nil
}
