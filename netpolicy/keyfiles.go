package netpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/keyfile"
)

// Keyfile sections by what the policy makes of them (keyfile names, after
// canonicalSection).
var (
	allowedSections = []string{"connection", "ethernet", "ipv4", "ipv6", "vlan", "bond", "bond-port",
		"bridge", "bridge-port", "dummy", "ethtool", "match", "link", "user", "proxy",
		"vrf", "vxlan", "veth", "infiniband", "sriov"}
	secretSections = []string{"802-1x", "vpn", "vpn-secrets", "wifi-security", "wireguard", "macsec",
		"pppoe", "ppp", "gsm", "cdma"}
	// allowedTypes are the connection types of the interface kinds the
	// agent supports (docs/nmstate.md); secretTypes carry credentials.
	allowedTypes = []string{"ethernet", "802-3-ethernet", "bond", "bridge", "vlan", "dummy",
		"loopback", "vrf", "vxlan", "veth", "infiniband"}
	secretTypes = []string{"vpn", "wireguard", "macsec", "pppoe", "gsm", "cdma"}
	// nameKeys are the [connection] keys NetworkManager reads as plain
	// strings that bind the profile: judged after unescaping.
	nameKeys = []string{"id", "uuid", "interface-name", "type", "master", "controller", "slave-type", "port-type"}
	// secretWords in a key name mean a credential or a credential's file.
	secretWords = []string{"password", "secret", "psk", "private-key", "cert", "ca-path", "pac-file"}
)

// CheckKeyfiles judges keyfiles of one network config: each on its own,
// then their UUIDs and ids against each other and their VLANs for cycles.
func (p Policy) CheckKeyfiles(kfs []Keyfile) error {
	for _, kf := range kfs {
		if err := CheckUTF8Keyfile(kf.Label, kf.Content); err != nil {
			return err
		}
	}
	profs := make([]profile, 0, len(kfs))
	for _, kf := range kfs {
		f, nm, err := read(kf)
		if err != nil {
			return &Refusal{Path: kf.Label, Rule: Names, Reason: "NetworkManager cannot read this keyfile: " + err.Error()}
		}
		if err := p.checkKeyfile(kf.Label, f, nm); err != nil {
			return err
		}
		pr := effective(nm)
		pr.label = kf.Label
		profs = append(profs, pr)
	}
	for i, a := range profs {
		for _, b := range profs[:i] {
			if a.uuid != "" && a.uuid == b.uuid {
				return &Refusal{Path: a.label + " [connection] uuid", Rule: Unique, Reason: fmt.Sprintf("uuid %s is also the uuid of %s", a.uuid, b.label)}
			}
			if a.id == b.id {
				return &Refusal{Path: a.label + " [connection] id", Rule: Unique, Reason: fmt.Sprintf("id %q is also the id of %s", a.id, b.label)}
			}
		}
	}
	return vlanCycle(profs)
}

func (p Policy) checkKeyfile(label string, f *keyfile.File, nm keyfile.Profile) error {
	if err := checkReading(label, f, nm); err != nil {
		return err
	}
	for _, raw := range slices.Sorted(slices.Values(f.Groups())) {
		sec := keyfile.Alias(raw)
		path := fmt.Sprintf("%s [%s]", label, raw)
		var err error
		switch {
		case sec == "hostname":
			err = p.refuse(path, Hostname, "sets how the node's hostname is chosen")
		case slices.Contains(secretSections, sec) || strings.HasPrefix(sec, "wireguard-peer."):
			err = p.refuse(path, FilesAndSecrets, "holds credentials or names certificate and key files")
		case !slices.Contains(allowedSections, sec):
			err = p.refuse(path, Unknown, "section the network policy does not know (allowed: %s)", strings.Join(allowedSections, ", "))
		case sec == "proxy":
			err = p.checkProxy(path, f, raw)
		}
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(slices.Values(f.Keys(raw))) {
			v, _ := f.Value(raw, k)
			if err := p.checkKey(path+" "+k, sec, k, v); err != nil {
				return err
			}
		}
	}
	if err := p.checkMatch(label, nm); err != nil {
		return err
	}
	if err := p.checkBinds(label, nm); err != nil {
		return err
	}
	if err := p.checkPortType(label, nm); err != nil {
		return err
	}
	return p.checkType(label, nm)
}

// checkType judges connection.type (checkReading has made sure there is
// one: NetworkManager infers none).
func (p Policy) checkType(label string, nm keyfile.Profile) error {
	return p.judgeKind(label+" [connection] type", nm.Type, "type", "profile", allowedTypes, secretTypes)
}

func (p Policy) checkProxy(path string, f *keyfile.File, group string) error {
	if _, ok := f.Value(group, "pac-script"); ok {
		return p.refuse(path+" pac-script", Scripts, "a proxy auto-config script")
	}
	for _, k := range slices.Sorted(slices.Values(f.Keys(group))) {
		v, _ := f.Value(group, k)
		switch {
		case k == "browser-only":
		case k == "method" && (v == "" || v == "0" || v == "none"):
		default:
			return p.refuse(path+" "+k, Proxy, "sets a proxy")
		}
	}
	return nil
}

func (p Policy) checkKey(path, sec, key, raw string) error {
	if sec == "connection" && slices.Contains(nameKeys, key) {
		if err := checkName(path, key, raw); err != nil {
			return err
		}
	}
	if sec == "vlan" && key == "parent" {
		if err := checkName(path, key, raw); err != nil {
			return err
		}
	}
	v, _ := keyfile.Unescape(raw)
	if err := p.checkAllowedKey(path, sec, key, raw, v); err != nil {
		return err
	}
	lk := strings.ToLower(key)
	switch {
	case sec == "connection" && key == "permissions" && v != "":
		return p.refuse(path, Permissions, "restricts who may use the profile")
	case sec == "connection" && key == "secondaries" && v != "":
		return p.refuse(path, FilesAndSecrets, "brings other profiles (VPNs) up with this one")
	case slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(lk, w) }):
		return p.refuse(path, FilesAndSecrets, "a credential or a credential's file")
	case namesFile(v):
		return p.refuse(path, FilesAndSecrets, "names a local file")
	}
	return nil
}

// checkName judges a value NetworkManager reads as one string: the escapes
// must be ones GLib takes (else NetworkManager drops the key, and the
// profile binds to something else than was checked), and the unescaped
// value must be what NetworkManager accepts for that key.
func checkName(path, key, raw string) error {
	v, err := keyfile.Unescape(raw)
	if err != nil {
		return &Refusal{Path: path, Rule: Names, Reason: fmt.Sprintf("%q has an escape GLib refuses (only \\s \\t \\n \\r \\\\): NetworkManager would drop the key", raw)}
	}
	bad := func(why string) error {
		return &Refusal{Path: path, Rule: Names, Reason: fmt.Sprintf("NetworkManager reads %q, which %s", v, why)}
	}
	switch key {
	case "interface-name":
		if why := badIfname(v); why != "" {
			return bad(why)
		}
	case "uuid":
		if !keyfile.IsUUID(v) {
			return bad("is not a UUID")
		}
	case "parent", "master", "controller":
		if !keyfile.IsUUID(v) {
			if why := badIfname(v); why != "" {
				return bad("is neither a UUID nor an interface name: it " + why)
			}
		}
	default:
		if v != raw && strings.ContainsAny(v, "\n\r\t") {
			return bad("contains a control character")
		}
	}
	return nil
}

// badIfname is the kernel's rule for interface names (dev_valid_name), which
// NetworkManager applies to interface-name; "" when name passes.
func badIfname(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > 15:
		return fmt.Sprintf("is %d bytes, the kernel allows 15", len(name))
	case name == "." || name == "..":
		return "is not allowed by the kernel"
	case strings.ContainsAny(name, "/:"):
		return "contains '/' or ':'"
	case strings.ContainsRune(name, '%'):
		return "contains '%', which NetworkManager refuses (the kernel takes it for a name template)"
	case strings.ContainsAny(name, " \t\n\v\f\r"):
		return "contains whitespace"
	case strings.ContainsRune(name, 0):
		return "contains a NUL byte"
	}
	return ""
}

// namesFile: a value that is a path or a file URL.
func namesFile(v string) bool {
	return strings.HasPrefix(v, "/") || strings.HasPrefix(strings.ToLower(v), "file:")
}

// vlanCycle refuses a VLAN whose chain of parents comes back to it. A parent
// is a profile's UUID or the interface name of another VLAN profile.
func vlanCycle(profs []profile) error {
	byIface, byUUID := map[string]int{}, map[string]int{}
	for i, p := range profs {
		if p.isVLAN && p.iface != "" {
			byIface[p.iface] = i
		}
		if p.uuid != "" {
			byUUID[p.uuid] = i
		}
	}
	next := func(i int) (int, bool) {
		par := profs[i].vlanParent
		if j, ok := byUUID[strings.ToLower(par)]; ok && profs[j].isVLAN {
			return j, true
		}
		j, ok := byIface[par]
		return j, ok
	}
	for start, p := range profs {
		if !p.isVLAN {
			continue
		}
		chain := []string{p.label}
		for i, steps := start, 0; steps <= len(profs); steps++ {
			j, ok := next(i)
			if !ok {
				break
			}
			if j == start {
				return &Refusal{Path: p.label + " [vlan] parent", Rule: VLANCycle, Reason: "the VLAN is its own parent: " + strings.Join(append(chain, p.label), " -> ")}
			}
			chain = append(chain, profs[j].label)
			i = j
		}
	}
	return nil
}
