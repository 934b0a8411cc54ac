package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/nmstate"
	"gopkg.in/yaml.v3"
)

// nmstateTypes are the interface types nmstate 2.2 knows; any other is
// warned about and taken as ethernet (05-gc-unknown-iface-type).
var nmstateTypes = []string{"bond", "linux-bridge", "dummy", "ethernet", "hsr", "loopback", "macsec", "mac-vlan", "mac-vtap",
	"ovs-bridge", "ovs-interface", "veth", "vlan", "vrf", "vxlan", "infiniband", "tun", "xfrm", "ipsec", "team", "ipvlan", "unknown"}

// ipFields are nmstate's InterfaceIp fields in serde's order, as its
// "unknown field" error lists them (04-gc-unknown-key).
var ipFields = []string{"enabled", "dhcp", "autoconf", "dhcp-client-id", "dhcp-duid", "address", "auto-dns", "auto-gateway", "auto-routes",
	"auto-route-table-id", "auto-route-metric", "addr-gen-mode", "allow-extra-address", "token", "dhcp-send-hostname", "dhcp-custom-hostname"}

// generate runs the built-in translator on what nmstate would translate:
// unknown interface types are ethernet, after nmstate's two warnings.
func generate(desired []byte) ([]nmstate.Keyfile, *yaml.Node, error) {
	doc, err := parseDoc(desired)
	if err != nil {
		return nil, nil, err
	}
	if doc != nil {
		changed := false
		if l := get(doc, "interfaces"); l != nil && l.Kind == yaml.SequenceNode {
			for _, it := range l.Content {
				t := get(it, "type")
				name := get(it, "name")
				if t == nil || t.Kind != yaml.ScalarNode || slices.Contains(nmstateTypes, t.Value) || name == nil {
					continue
				}
				logLine("WARN", "nmstate::iface", "Unsupported interface type %s", t.Value)
				logLine("WARN", "nmstate::ifaces::inter_ifaces", "Setting unknown type interface %s to ethernet", name.Value)
				t.Value, changed = "ethernet", true
			}
		}
		if changed {
			if desired, err = yaml.Marshal(doc); err != nil {
				return nil, nil, declined("re-encoding the state: %v", err)
			}
		}
	}
	kfs, err := nmstate.GenerateKeyfiles(desired)
	if err != nil {
		return nil, nil, translatorError(err, doc)
	}
	return kfs, doc, nil
}

// parseDoc is the state's top mapping (nil: empty document).
func parseDoc(desired []byte) (*yaml.Node, error) {
	var d yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(desired)).Decode(&d); err != nil || len(d.Content) == 0 {
		// The translator gives nmstate's refusal of bad YAML.
		return nil, nil
	}
	if d.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	return d.Content[0], nil
}

var unknownIPField = regexp.MustCompile(`^interfaces\[\d+\]\.ipv[46]\.[^.]+$`)

// translatorError is the translator's refusal in nmstatectl's words. An
// input the translator leaves to nmstate (Unsupported) is declined: what
// nmstate makes of it no transcript shows.
func translatorError(err error, doc *yaml.Node) error {
	var e *nmstate.Error
	if !errors.As(err, &e) {
		return declined("translator: %v", err)
	}
	if e.Kind == nmstate.KindUnsupported {
		return declined("gc of %s: %s", e.Path, e.Reason)
	}
	if strings.HasPrefix(e.Reason, "unknown field `") && unknownIPField.MatchString(e.Path) {
		// serde_yaml reads an interface through a buffered value: its
		// path stops at "interfaces", its position is that list's.
		pos := ""
		if l := get(doc, "interfaces"); l != nil {
			pos = fmt.Sprintf(" at line %d column %d", l.Line, l.Column)
		}
		quoted := make([]string, len(ipFields))
		for i, f := range ipFields {
			quoted[i] = "`" + f + "`"
		}
		return nmErr(e.Kind, "Invalid YAML string: interfaces: %s, expected one of %s%s", e.Reason, strings.Join(quoted, ", "), pos)
	}
	return nmErr(e.Kind, "%s", e.Reason)
}

func gc(desired []byte) error {
	kfs, _, err := generate(desired)
	if err != nil {
		return err
	}
	list := sequence()
	for _, kf := range kfs {
		if m := keyValue(kf.Content, "connection", "master"); m != "" {
			info("nmstate::nm::profile", "Skipping activation of %s as its controller %s will automatically activate it",
				keyValue(kf.Content, "connection", "interface-name"), m)
		}
		pair := sequence()
		pair.Content = append(pair.Content, str(kf.Name), str(string(kf.Content)))
		list.Content = append(list.Content, pair)
	}
	// nmstatectl println!s serde_yaml's text, which ends in a newline.
	_, err = os.Stdout.WriteString(emit(put(mapping(), "NetworkManager", list)) + "\n")
	return err
}

// keyValue is key k of section sec in a keyfile ("" if absent).
func keyValue(kf []byte, sec, k string) string {
	in := false
	for _, l := range strings.Split(string(kf), "\n") {
		if strings.HasPrefix(l, "[") {
			in = l == "["+sec+"]"
			continue
		}
		if in {
			if key, v, ok := strings.Cut(l, "="); ok && key == k {
				return v
			}
		}
	}
	return ""
}
