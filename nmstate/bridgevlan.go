package nmstate

import (
	"cmp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// A bridge port's VLANs (ifaces/bridge_vlan.rs, settings/bridge.rs): gc's
// checks, and NetworkManager's where gc writes what it drops or refuses
// (docs/nmstate.md, bridge rows).

type vlanRange struct {
	lo, hi uint64
	text   string
}

// parsePortVLAN renders a port's vlan block as NetworkManager's
// bridge-port.vlans: ranges sorted by first id, the native/access tag as
// "<id> pvid untagged".
func parsePortVLAN(path string, n *yaml.Node) (string, error) {
	fs, err := mapping(path, n, []string{"mode", "tag", "enable-native", "trunk-tags"}, nil)
	if err != nil {
		return "", err
	}
	mode, native := "", false
	var tag *uint64
	var ranges []vlanRange
	for _, f := range fs {
		switch f.key {
		case "mode":
			mode, err = str(f.path, f.val, maxTextLen, true)
			if err == nil && mode != "trunk" && mode != "access" {
				err = invalid(f.path, "unknown variant `%s`, expected `trunk` or `access`", mode)
			}
		case "tag":
			tag, err = optional(vid(f.path, f.val))
		case "enable-native":
			native, err = boolean(f.path, f.val)
		case "trunk-tags":
			ranges, err = parseTrunkTags(f.path, f.val)
		}
		if err != nil {
			return "", err
		}
	}
	switch {
	case mode == "access" && tag != nil && len(ranges) == 0:
		return uitoa(*tag) + " pvid untagged", nil
	case mode == "trunk" && len(ranges) > 0 && (tag != nil) == native:
		if tag != nil {
			for _, r := range ranges {
				if r.lo <= *tag && *tag <= r.hi {
					// gc writes it; NetworkManager refuses the keyfile
					// (testdata/gcmade 218).
					return "", unsupported(join(path, "tag"), "duplicate bridge VLAN vid %d (the native tag is also a trunk tag): NetworkManager refuses the keyfile", *tag)
				}
			}
			ranges = append(ranges, vlanRange{*tag, *tag, uitoa(*tag) + " pvid untagged"})
		}
		slices.SortStableFunc(ranges, func(a, b vlanRange) int { return cmp.Compare(a.lo, b.lo) })
		var parts []string
		for _, r := range ranges {
			parts = append(parts, r.text)
		}
		return strings.Join(parts, ","), nil
	}
	return "", unsupported(path, "only an access port with a tag, or a trunk port with trunk-tags (and a tag exactly when enable-native) is supported")
}

func parseTrunkTags(path string, n *yaml.Node) ([]vlanRange, error) {
	items, err := sequence(path, n, 4094)
	if err != nil {
		return nil, err
	}
	var out []vlanRange
	for i, it := range items {
		r, err := parseTrunkTag(index(path, i), it)
		if err != nil {
			return nil, err
		}
		// gc refuses trunk tags that share a vid, naming the first one
		// (testdata/gcmade 208-210).
		for _, o := range out {
			if r.lo <= o.hi && o.lo <= r.hi {
				v := max(r.lo, o.lo)
				return nil, invalid(index(path, i), "Bridge VLAN trunk tag id=%d is overlapping with other tag id=%d", v, v)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func parseTrunkTag(p string, it *yaml.Node) (vlanRange, error) {
	fs, err := mapping(p, it, []string{"id", "id-range"}, nil)
	if err != nil {
		return vlanRange{}, err
	}
	if len(fs) != 1 {
		return vlanRange{}, invalid(p, "a trunk tag needs exactly one of id, id-range")
	}
	f := fs[0]
	if f.key == "id" {
		v, err := vid(f.path, f.val)
		return vlanRange{v, v, uitoa(v)}, err
	}
	rs, err := mapping(f.path, f.val, []string{"min", "max"}, nil)
	if err != nil {
		return vlanRange{}, err
	}
	var lo, hi uint64
	for _, r := range rs {
		v, err := unsigned(r.path, r.val, maxVID)
		if err != nil {
			return vlanRange{}, err
		}
		if r.key == "min" {
			lo = v
		} else {
			hi = v
		}
	}
	switch {
	case len(rs) != 2:
		return vlanRange{}, invalid(f.path, "id-range needs min and max")
	case lo > hi || lo == 0 || hi > 4094:
		// gc writes it; NetworkManager drops the key (gcmade 211, 222).
		return vlanRange{}, unsupported(f.path, "id-range %d-%d: NetworkManager takes ranges within 1..4094, min <= max, and drops the key", lo, hi)
	}
	return vlanRange{lo, hi, uitoa(lo) + "-" + uitoa(hi)}, nil
}

// maxVID is the largest vid nmstate reads (a u16); gc refuses more.
const maxVID = 65535

// vid reads a bridge VLAN id: beyond a u16 refused as gc refuses it, 0 and
// 4095 and up (which gc writes and NetworkManager drops, gcmade 212, 221)
// refused as Unsupported.
func vid(path string, n *yaml.Node) (uint64, error) {
	v, err := unsigned(path, n, maxVID)
	if err == nil && (v == 0 || v > 4094) {
		err = unsupported(path, "vlan id %d: NetworkManager takes 1..4094 and drops the key", v)
	}
	return v, err
}
