package apply

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// ParseKeyfile checks that text is a NetworkManager keyfile in the ini
// dialect NetworkManager reads (nm-settings-keyfile(5)): [section] headers,
// key=value lines, # or ; comments, blank lines, a [connection] section with
// an id or a type. It returns a *FieldError naming path and the line.
func ParseKeyfile(path string, text []byte) error {
	_, err := parseKeyfile(path, text)
	return err
}

// keyfileSections maps section -> key -> value of a keyfile.
type keyfileSections map[string]map[string]string

func parseKeyfile(path string, text []byte) (keyfileSections, error) {
	secs := keyfileSections{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") || len(line) < 3 || strings.ContainsAny(line[1:len(line)-1], "[]") {
				return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile line %d: malformed section header %q", n, line)}
			}
			cur = line[1 : len(line)-1]
			if secs[cur] == nil {
				secs[cur] = map[string]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile line %d: not a key=value pair", n)}
			}
			if cur == "" {
				return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile line %d: key %q before any section", n, k)}
			}
			secs[cur][k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile: %v", err)}
	}
	c, ok := secs["connection"]
	if !ok {
		return nil, &FieldError{Path: path, Reason: "keyfile has no [connection] section"}
	}
	if c["id"] == "" && c["type"] == "" {
		return nil, &FieldError{Path: path, Reason: "keyfile [connection] has neither id nor type"}
	}
	return secs, nil
}

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
		name, addrs := keyfileAddresses(kf)
		out[name] = append(out[name], addrs...)
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// keyfileAddresses reads interface-name (default: the file's name) and the
// addressN keys of [ipv4] and [ipv6] ("ip/prefix[,gateway]") of a keyfile
// Render has already checked.
func keyfileAddresses(kf Keyfile) (iface string, addrs []string) {
	secs, _ := parseKeyfile(kf.Name, kf.Content)
	iface = secs["connection"]["interface-name"]
	if iface == "" {
		iface = strings.TrimSuffix(kf.Name, keyfileSuffix)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		for k, v := range secs[fam] {
			if strings.HasPrefix(k, "address") {
				a, _, _ := strings.Cut(v, ",")
				addrs = append(addrs, a)
			}
		}
	}
	return iface, addrs
}
