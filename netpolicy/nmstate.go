package netpolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The nmstate keys the policy allows (docs/nmstate.md lists what the
// built-in translator takes; nmstatectl takes more, and what it takes beyond
// these is refused here, whichever generator runs).
var (
	allowedTop   = []string{"interfaces", "routes", "route-rules", "dns-resolver"}
	allowedIface = []string{"name", "type", "state", "profile-name", "identifier", "mac-address",
		"permanent-mac-address", "mtu", "min-mtu", "max-mtu", "description", "ipv4", "ipv6", "ethernet",
		"ethtool", "link-aggregation", "bridge", "vlan", "controller", "accept-all-mac-addresses",
		"copy-mac-from", "wait-ip", "lldp", "mptcp", "vrf", "vxlan", "veth", "infiniband"}
	secretIface    = []string{"802.1x", "macsec", "ipsec", "wireguard"}
	allowedKinds   = []string{"ethernet", "bond", "linux-bridge", "vlan", "dummy", "loopback", "vrf", "vxlan", "veth", "infiniband"}
	secretKinds    = []string{"macsec", "ipsec", "wireguard"}
	nmstateSecrets = []string{"password", "secret", "psk", "private-key", "cert", "ca-path", "mka-cak", "mka-ckn"}
)

// CheckState judges a rendered nmstate (or nm-configurator) state, keys as
// config.<path>. The state must come from apply's render, which gives an
// interface without type: the type gc gives it: an untyped interface is
// judged here only by its keys, never by its kind.
func (p Policy) CheckState(state map[string]any) error {
	if err := CheckUTF8Value("config", map[string]any(state)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(state)) {
		path := "config." + k
		var err error
		switch {
		case k == "hostname":
			err = p.refuse(path, Hostname, "sets the node's hostname")
		case !slices.Contains(allowedTop, k):
			err = p.refuse(path, Unknown, "not a key the network policy knows (allowed: %s)", strings.Join(allowedTop, ", "))
		case k == "interfaces":
			err = p.checkInterfaces(path, state[k])
		default:
			err = p.checkValue(path, state[k])
		}
		if err != nil {
			return err
		}
	}
	return stateVLANCycle(state)
}

// checkInterfaces judges each interface key by key. An interface without
// type: is judged as what will be written: apply's rendering gives it the
// type nmstatectl gc and the built-in translator give it (ethernet)
// before the policy sees the state, and the keyfiles written are judged
// in turn; an absent one writes nothing.
func (p Policy) checkInterfaces(path string, v any) error {
	list, err := p.interfaceList(path, v)
	if err != nil {
		return err
	}
	for i, it := range list {
		ip := fmt.Sprintf("%s[%d]", path, i)
		iface, ok := it.(map[string]any)
		if !ok {
			return p.refuse(ip, Unknown, "an interface that is not a mapping")
		}
		for _, k := range slices.Sorted(maps.Keys(iface)) {
			kp := ip + "." + k
			var err error
			switch {
			case k == "dispatch":
				err = p.refuse(kp, Scripts, "scripts NetworkManager's dispatcher runs as root")
			case slices.Contains(secretIface, k):
				err = p.refuse(kp, FilesAndSecrets, "holds credentials or names certificate and key files")
			case !slices.Contains(allowedIface, k):
				err = p.refuse(kp, Unknown, "an interface key the network policy does not know")
			case k == "type":
				err = p.checkKind(kp, iface[k])
			default:
				err = p.checkValue(kp, iface[k])
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (p Policy) checkKind(path string, v any) error {
	t, _ := v.(string)
	return p.judgeKind(path, t, "interface type", "interface", allowedKinds, secretKinds)
}

// judgeKind is the one rule for a profile's or an interface's type: an
// allowed kind passes, a kind that carries credentials is refused as such,
// anything else as unknown. key names the field and noun the thing typed
// in the messages.
func (p Policy) judgeKind(path, t, key, noun string, allowed, secret []string) error {
	switch {
	case slices.Contains(allowed, t):
		return nil
	case slices.Contains(secret, t):
		return p.refuse(path, FilesAndSecrets, "a %s %s carries credentials", t, noun)
	}
	return p.refuse(path, Unknown, "%s %q is not a kind the agent supports (%s)", key, t, strings.Join(allowed, ", "))
}

// checkValue walks an allowed subtree for credentials and local files.
func (p Policy) checkValue(path string, v any) error {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			kp := path + "." + k
			lk := strings.ToLower(k)
			if slices.ContainsFunc(nmstateSecrets, func(w string) bool { return strings.Contains(lk, w) }) {
				if err := p.refuse(kp, FilesAndSecrets, "a credential or a credential's file"); err != nil {
					return err
				}
			}
			if err := p.checkValue(kp, t[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := p.checkValue(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case string:
		if namesFile(t) {
			return p.refuse(path, FilesAndSecrets, "names a local file")
		}
	}
	return nil
}

// stateVLANCycle refuses VLANs whose base-iface chain comes back to them
// (docs/reliability.md, "Network-config policy", rule vlan-cycle):
// NetworkManager could never create any of them.
func stateVLANCycle(state map[string]any) error {
	list, _ := state["interfaces"].([]any)
	base := map[string]string{}
	index := map[string]int{}
	for i, it := range list {
		iface, _ := it.(map[string]any)
		name, _ := iface["name"].(string)
		vlan, _ := iface["vlan"].(map[string]any)
		b, _ := vlan["base-iface"].(string)
		if name != "" && b != "" {
			base[name], index[name] = b, i
		}
	}
	for _, start := range slices.Sorted(maps.Keys(base)) {
		chain := []string{start}
		for cur, steps := start, 0; steps <= len(base); steps++ {
			next, ok := base[cur]
			if !ok {
				break
			}
			chain = append(chain, next)
			if next == start {
				return &Refusal{Path: fmt.Sprintf("config.interfaces[%d].vlan.base-iface", index[start]), Rule: VLANCycle,
					Reason: "the VLAN is its own base interface: " + strings.Join(chain, " -> ")}
			}
			cur = next
		}
	}
	return nil
}
