package apply

import (
	"fmt"
	"net/netip"
	"strconv"
)

// checkNmstate validates the parts of an nmstate state that become file
// names or must be addresses, so a hostile value is named by its field
// before any tool sees it.
func checkNmstate(state map[string]any) error {
	ifaces, _ := state["interfaces"].([]any)
	for i, it := range ifaces {
		iface, ok := it.(map[string]any)
		if !ok {
			return &FieldError{Path: fmt.Sprintf("config.interfaces[%d]", i), Reason: "not a mapping"}
		}
		base := fmt.Sprintf("config.interfaces[%d]", i)
		for _, k := range []string{"name", "profile-name"} {
			v, present := iface[k]
			if !present {
				continue
			}
			s, ok := v.(string)
			if !ok {
				return &FieldError{Path: base + "." + k, Reason: "not a string"}
			}
			if err := checkFileName(base+"."+k, s+keyfileSuffix); err != nil {
				return err
			}
			if s == "." || s == ".." {
				return &FieldError{Path: base + "." + k, Reason: fmt.Sprintf("%q is not an interface name", s)}
			}
		}
		for _, fam := range []string{"ipv4", "ipv6"} {
			ip, _ := iface[fam].(map[string]any)
			addrs, _ := ip["address"].([]any)
			for j, a := range addrs {
				am, _ := a.(map[string]any)
				if err := mustAddr(fmt.Sprintf("%s.%s.address[%d].ip", base, fam, j), am["ip"], false); err != nil {
					return err
				}
			}
		}
	}
	routes, _ := state["routes"].(map[string]any)
	rlist, _ := routes["config"].([]any)
	for i, rt := range rlist {
		rm, _ := rt.(map[string]any)
		p := fmt.Sprintf("config.routes.config[%d]", i)
		if err := mustAddr(p+".next-hop-address", rm["next-hop-address"], false); err != nil {
			return err
		}
		if err := mustAddr(p+".destination", rm["destination"], true); err != nil {
			return err
		}
	}
	dns, _ := state["dns-resolver"].(map[string]any)
	dconf, _ := dns["config"].(map[string]any)
	servers, _ := dconf["server"].([]any)
	for i, s := range servers {
		if err := mustAddr(fmt.Sprintf("config.dns-resolver.config.server[%d]", i), s, false); err != nil {
			return err
		}
	}
	return nil
}

// mustAddr checks an optional address field; prefix allows CIDR notation.
func mustAddr(path string, v any, prefix bool) error {
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return &FieldError{Path: path, Reason: fmt.Sprintf("address must be a string, got %T", v)}
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	if prefix {
		if _, err := netip.ParsePrefix(s); err == nil {
			return nil
		}
	}
	return &FieldError{Path: path, Reason: fmt.Sprintf("%s is not an IP address", strconv.Quote(s))}
}
