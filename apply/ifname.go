package apply

import (
	"fmt"
	"strings"

	"github.com/nodereg/nodereg/internal/keyfile"
)

// maxIfname is IFNAMSIZ (16) less the terminating NUL.
const maxIfname = 15

// checkIfname applies the kernel's rule for interface names (dev_valid_name,
// which NetworkManager repeats for interface-name): 1 to 15 bytes, not "."
// or "..", no '/', ':' or whitespace; and NetworkManager's: no '%'. A name the kernel refuses would get
// past render and fail in nmstatectl or NetworkManager, on the node, after
// the old config was taken down (docs/reliability.md, "Hostile server").
func checkIfname(path, name string) error {
	bad := func(why string) error {
		return &FieldError{Path: path, Reason: fmt.Sprintf("interface name %q %s", name, why)}
	}
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > maxIfname:
		return bad(fmt.Sprintf("is %d bytes, the kernel allows %d", len(name), maxIfname))
	case name == "." || name == "..":
		return bad("is not allowed by the kernel")
	case strings.ContainsAny(name, "/:"):
		return bad("contains '/' or ':'")
	case strings.ContainsRune(name, '%'):
		return bad("contains '%', which NetworkManager refuses (the kernel takes it for a name template)")
	case strings.ContainsAny(name, " \t\n\v\f\r"):
		return bad("contains whitespace")
	case strings.ContainsRune(name, 0):
		return bad("contains a NUL byte")
	}
	return nil
}

// checkIfnameField checks v at path if it is there; it must be a string.
func checkIfnameField(path string, v any) error {
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return &FieldError{Path: path, Reason: fmt.Sprintf("interface name must be a string, got %T", v)}
	}
	return checkIfname(path, s)
}

// checkNmstateIfnames checks every place of an nmstate state that names a
// kernel interface: an interface's name (unless it is matched by MAC
// address, when the name is only the profile's), its controller, the base
// of a VLAN, VXLAN or MAC-VLAN, bond and bridge ports, and routes'
// next-hop-interface.
func checkNmstateIfnames(state map[string]any) error {
	ifaces, _ := state["interfaces"].([]any)
	for i, it := range ifaces {
		iface, _ := it.(map[string]any)
		base := fmt.Sprintf("config.interfaces[%d]", i)
		if iface["identifier"] != "mac-address" {
			if err := checkIfnameField(base+".name", iface["name"]); err != nil {
				return err
			}
		}
		if err := checkIfnameField(base+".controller", iface["controller"]); err != nil {
			return err
		}
		for _, kind := range []string{"vlan", "vxlan", "mac-vlan", "mac-vtap", "ipvlan"} {
			sub, _ := iface[kind].(map[string]any)
			if err := checkIfnameField(base+"."+kind+".base-iface", sub["base-iface"]); err != nil {
				return err
			}
		}
		for _, kind := range []string{"link-aggregation", "bridge"} {
			sub, _ := iface[kind].(map[string]any)
			for _, key := range []string{"port", "ports"} {
				ports, _ := sub[key].([]any)
				for j, p := range ports {
					path := fmt.Sprintf("%s.%s.%s[%d]", base, kind, key, j)
					if pm, ok := p.(map[string]any); ok {
						p, path = pm["name"], path+".name"
					}
					if err := checkIfnameField(path, p); err != nil {
						return err
					}
				}
			}
		}
	}
	routes, _ := state["routes"].(map[string]any)
	rlist, _ := routes["config"].([]any)
	for i, rt := range rlist {
		rm, _ := rt.(map[string]any)
		if err := checkIfnameField(fmt.Sprintf("config.routes.config[%d].next-hop-interface", i), rm["next-hop-interface"]); err != nil {
			return err
		}
	}
	return nil
}

// checkKeyfile parses a keyfile as ParseKeyfile does and checks the
// interface names it binds: connection.interface-name and a VLAN's parent
// when it is not a UUID, as written (the network policy judges them as
// NetworkManager unescapes them, rule names).
func checkKeyfile(path string, text []byte) error {
	f, err := parseKeyfile(path, text)
	if err != nil {
		return err
	}
	if name, ok := f.Value("connection", "interface-name"); ok {
		if err := checkIfname(path+" [connection] interface-name", name); err != nil {
			return err
		}
	}
	if parent, ok := f.Value("vlan", "parent"); ok {
		if !keyfile.IsUUID(parent) {
			if err := checkIfname(path+" [vlan] parent", parent); err != nil {
				return err
			}
		}
	}
	return nil
}
