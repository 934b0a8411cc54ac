package apply

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// InterfaceAddresses lists the addresses (with prefix length) the rendered
// config puts on each interface, for the node's report back to the server.
func InterfaceAddresses(r *Rendered) map[string][]string {
	out := map[string][]string{}
	if r == nil {
		return out
	}
	if ifaces, ok := r.State["interfaces"].([]any); ok {
		for _, i := range ifaces {
			m, _ := i.(map[string]any)
			name, _ := m["name"].(string)
			for _, fam := range []string{"ipv4", "ipv6"} {
				f, _ := m[fam].(map[string]any)
				addrs, _ := f["address"].([]any)
				for _, a := range addrs {
					am, _ := a.(map[string]any)
					ip, _ := am["ip"].(string)
					if name != "" && ip != "" {
						out[name] = append(out[name], fmt.Sprintf("%s/%v", ip, am["prefix-length"]))
					}
				}
			}
		}
	}
	for _, kf := range r.Keyfiles {
		name, addrs := keyfileAddresses(kf.Content)
		if name == "" {
			name = strings.TrimSuffix(kf.Name, keyfileSuffix)
		}
		out[name] = append(out[name], addrs...)
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// keyfileAddresses reads interface-name and the addressN keys of [ipv4] and
// [ipv6] ("ip/prefix[,gateway]").
func keyfileAddresses(text []byte) (iface string, addrs []string) {
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case section == "connection" && k == "interface-name":
			iface = v
		case (section == "ipv4" || section == "ipv6") && strings.HasPrefix(k, "address"):
			a, _, _ := strings.Cut(v, ",")
			addrs = append(addrs, a)
		}
	}
	return iface, addrs
}
