package netpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/keyfile"
)

// AnyDevice: a profile that names no device: no interface-name, no
// mac-address and no [match] interface-name.
// NetworkManager may then activate it on any device of its kind, every
// NIC the node has included (docs/reliability.md, "Network-config
// policy").
const AnyDevice Rule = "any-device"

// ownGroup are the types NetworkManager loads only with their own group,
// ownGroupBesideEthernet those it needs it for when the profile has an
// [ethernet] group.
var (
	ownGroup               = []string{"vlan", "veth", "vxlan", "vrf"}
	ownGroupBesideEthernet = []string{"bond", "bridge", "dummy"}
)

// ownName are the types NetworkManager loads only with an interface name
// (it creates the device).
var ownName = []string{"bond", "bridge", "dummy", "vrf", "veth", "vxlan"}

// addressless are the ip methods NetworkManager takes no address with.
var addressless = []string{"disabled", "link-local", "ignore"}

// checkReading refuses what NetworkManager would read otherwise than the
// policy judges it, or not at all (rule names): a value GLib refuses in a
// key NetworkManager then drops, spellings internal/keyfile does not
// model, and the few shapes where NetworkManager 1.42 and later versions
// or two groups disagree.
func checkReading(label string, f *keyfile.File, nm keyfile.Profile) error {
	names := func(where, format string, a ...any) error {
		return &Refusal{Path: label + " " + where, Rule: Names, Reason: fmt.Sprintf(format, a...)}
	}
	if len(nm.Dropped) > 0 {
		return names(nm.Dropped[0], "has an escape GLib refuses (strings take only \\s \\t \\n \\r \\\\, lists also \\;): NetworkManager would drop the key")
	}
	if len(nm.Unmodelled) > 0 {
		return names(nm.Unmodelled[0], "is not written as NetworkManager writes it (addressN=ip/prefix[,gateway], mac-address as colon-separated hex octets), and NetworkManager reads other spellings in ways that are not checked")
	}
	if !f.HasGroup("connection") {
		return &Refusal{Path: label, Rule: Names, Reason: "has no [connection] section: NetworkManager cannot load it"}
	}
	if nm.Type == "" {
		return names("[connection] type", "is missing: NetworkManager refuses a profile without a type")
	}
	if id, ok := f.Value("connection", "id"); ok && id == "" {
		return names("[connection] id", "is empty: NetworkManager refuses a profile with an empty id")
	}
	for _, g := range f.Groups() {
		if a := keyfile.Alias(g); a != g && f.HasGroup(a) {
			return names("["+g+"]", "is the group [%s] under another name: NetworkManager reads the two as one setting", a)
		}
		if _, ok := f.Value(g, "interface-name"); ok && g != "connection" && g != "match" {
			return names("["+g+"] interface-name", "is a deprecated place for the interface name, which NetworkManager still reads when [connection] has none: set [connection] interface-name")
		}
	}
	if nm.Type == "vlan" && nm.VLANParent == "" {
		return names("[vlan] parent", "is missing: NetworkManager refuses a VLAN without its parent")
	}
	if (nm.Master == "") != (nm.SlaveType == "") {
		return names("[connection] master", "and slave-type go together: NetworkManager refuses a port without both (master %q, slave-type %q)", nm.Master, nm.SlaveType)
	}
	if slices.Contains(ownName, nm.Type) && nm.InterfaceName == "" {
		return names("[connection] interface-name", "is missing: NetworkManager refuses a %s profile without it", nm.Type)
	}
	if f.HasGroup("infiniband") && nm.Type != "infiniband" {
		return names("[infiniband]", "in a %s profile: NetworkManager refuses it", nm.Type)
	}
	eth := f.HasGroup("ethernet") || f.HasGroup("802-3-ethernet")
	if !f.HasGroup(nm.Type) && (slices.Contains(ownGroup, nm.Type) || eth && slices.Contains(ownGroupBesideEthernet, nm.Type)) {
		return names("["+nm.Type+"]", "is missing: NetworkManager refuses a %s profile without it here", nm.Type)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		// As written: NetworkManager checks a port's IP settings before
		// it drops them.
		if !f.HasGroup(fam) {
			continue
		}
		addrs := slices.ContainsFunc(f.Keys(fam), keyfile.IsAddressKey)
		m, err := f.String(fam, "method")
		switch {
		case err == keyfile.ErrNotFound:
			return names("["+fam+"] method", "is missing: NetworkManager refuses an [%s] section without it", fam)
		case m == "manual" && !addrs:
			return names("["+fam+"] method", "is manual without an address: NetworkManager refuses the profile")
		case addrs && slices.Contains(addressless, m):
			return names("["+fam+"] method", "is %s, with which NetworkManager refuses addresses", m)
		case m == "shared" && len(slices.DeleteFunc(f.Keys(fam), func(k string) bool { return !keyfile.IsAddressKey(k) })) > 1:
			return names("["+fam+"] method", "is shared with more than one address: NetworkManager keeps only the first")
		}
	}
	if raw, ok := f.Value("vlan", "id"); ok {
		if n, ok := keyfile.DecimalInt(raw); !ok || n < 0 || n > 4094 {
			return names("[vlan] id", "%q is not a plain decimal from 0 to 4094, the VLAN ids NetworkManager takes", raw)
		}
	}
	for _, k := range [][2]string{{"controller", "master"}, {"port-type", "slave-type"}} {
		newer, ok := f.Value("connection", k[0])
		if !ok {
			continue
		}
		if older, _ := f.Value("connection", k[1]); older != newer {
			return names("[connection] "+k[0], "is read by NetworkManager 1.46 and later only; 1.42 reads %s=, which must then say the same", k[1])
		}
	}
	return nil
}

// portTypes are the controller kinds of the supported interface kinds.
var portTypes = []string{"bond", "bridge", "vrf"}

// checkPortType judges connection.slave-type: NetworkManager refuses a
// kind it does not know, and the policy knows those it supports.
func (p Policy) checkPortType(label string, nm keyfile.Profile) error {
	if nm.SlaveType == "" || slices.Contains(portTypes, nm.SlaveType) {
		return nil
	}
	return p.refuse(label+" [connection] slave-type", Unknown, "%q is not a controller kind the agent supports (%s)", nm.SlaveType, strings.Join(portTypes, ", "))
}

// checkMatch judges [match] as NetworkManager reads it: each key a list.
// An empty item makes NetworkManager refuse the profile; an item that is
// a pattern (a glob, a '!' negation, a '\' escape of NetworkManager's
// match syntax) or a list of several interface names can bind more than
// one device (rule match-wildcard).
func (p Policy) checkMatch(label string, nm keyfile.Profile) error {
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range nm.Match {
			if !yield(k) {
				return
			}
		}
	}) {
		path := label + " [match] " + k
		items := nm.Match[k]
		for _, item := range items {
			switch {
			case item == "":
				return &Refusal{Path: path, Rule: Names, Reason: fmt.Sprintf("has an empty item, which NetworkManager refuses (%q)", items)}
			case wildcard(item):
				if err := p.refuse(path, MatchWildcard, "%q matches devices by pattern or by exclusion, not by name", item); err != nil {
					return err
				}
			case k == "interface-name":
				if why := badIfname(matchName(item)); why != "" {
					return &Refusal{Path: path, Rule: Names, Reason: fmt.Sprintf("NetworkManager reads the item %q, which %s", item, why)}
				}
			}
		}
		if k == "interface-name" && len(items) > 1 {
			if err := p.refuse(path, MatchWildcard, "lists %d interfaces (%q): the profile can bind any of them", len(items), items); err != nil {
				return err
			}
		}
	}
	return nil
}

// wildcard: a match item NetworkManager reads as a pattern: after an
// optional '|' or '&' (or '~'), a '!' negation, a glob character or a
// backslash (its escape).
func wildcard(item string) bool {
	item = strings.TrimLeft(item, "|&~")
	return strings.HasPrefix(item, "!") || strings.ContainsAny(item, "*?[\\")
}

// matchName is a plain match item's interface name.
func matchName(item string) string { return strings.TrimLeft(item, "|&~") }

// boundName is the one device a profile names: its interface name, its
// MAC address, or its one plain [match] interface-name; "" when none.
func boundName(nm keyfile.Profile) (by, value string) {
	switch m := nm.Match["interface-name"]; {
	case nm.InterfaceName != "":
		return "interface-name", nm.InterfaceName
	case nm.MAC != "":
		return "mac-address", nm.MAC
	case len(m) == 1 && !wildcard(m[0]) && m[0] != "":
		return "interface-name", matchName(m[0])
	}
	return "", ""
}

// checkBinds refuses a profile that can bind more than one device by its
// [match] alone (rule match-wildcard: an empty interface-name list, which
// matches every device, or a match by driver or path), or that names no
// device at all (rule any-device).
func (p Policy) checkBinds(label string, nm keyfile.Profile) error {
	if nm.InterfaceName != "" || nm.MAC != "" {
		return nil
	}
	if items, ok := nm.Match["interface-name"]; ok {
		if len(items) == 0 {
			return p.refuse(label+" [match] interface-name", MatchWildcard, "is empty: NetworkManager then matches every device")
		}
		return nil // each item judged by checkMatch
	}
	for _, k := range []string{"driver", "path"} {
		if len(nm.Match[k]) > 0 {
			return p.refuse(label+" [match] "+k, MatchWildcard, "matches devices by %s, not by name: the profile can bind more than one", k)
		}
	}
	return p.refuse(label+" [connection] interface-name", AnyDevice,
		"missing, as are mac-address and a [match] interface-name: NetworkManager may activate the profile on any %s device", nm.Type)
}
