package apply

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/keyfile"
)

// ParseKeyfile checks that text is a keyfile NetworkManager loads as far as
// its format goes (internal/keyfile: GLib's key-file rules, so only '#'
// starts a comment): groups, key=value lines, a [connection] group with an
// id or a type. It returns a *FieldError naming path and the line.
func ParseKeyfile(path string, text []byte) error {
	_, err := parseKeyfile(path, text)
	return err
}

func parseKeyfile(path string, text []byte) (*keyfile.File, error) {
	f, err := keyfile.Parse(text)
	if err != nil {
		return nil, &FieldError{Path: path, Reason: "keyfile " + err.Error()}
	}
	if !f.HasGroup("connection") {
		return nil, &FieldError{Path: path, Reason: "keyfile has no [connection] section"}
	}
	id, _ := f.Value("connection", "id")
	typ, _ := f.Value("connection", "type")
	if id == "" && typ == "" {
		return nil, &FieldError{Path: path, Reason: "keyfile [connection] has neither id nor type"}
	}
	return f, nil
}

// readProfile is what NetworkManager makes of a keyfile Render has
// already checked.
func readProfile(name string, content []byte) keyfile.Profile {
	f, err := keyfile.Parse(content)
	if err != nil {
		f, _ = keyfile.Parse(nil)
	}
	return keyfile.ReadProfile(f, name)
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

// keyfileAddresses reads the interface name (default: the file's name)
// and the addresses (ip/prefix) of a keyfile Render has already checked,
// as NetworkManager reads them.
func keyfileAddresses(kf Keyfile) (iface string, addrs []string) {
	p := readProfile(kf.Name, kf.Content)
	iface = p.InterfaceName
	if iface == "" {
		iface = strings.TrimSuffix(kf.Name, keyfileSuffix)
	}
	return iface, append(p.Addresses4, p.Addresses6...)
}
