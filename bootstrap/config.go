package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Key is where the settings live in the elemental config file. Error
// messages name fields below it.
const Key = "elemental.registration.bootstrap-network"

// Bounds on the local config: far above a real rack, far below what would
// make the agent walk for hours.
const (
	MaxStaticEntries = 4096
	MaxRangeSize     = 65536
	MaxPlaceholders  = 64
)

// Config is elemental.registration.bootstrap-network. Configurator and
// Config mean what they mean in the server's network config (docs/protocol.md
// 7.5) and are rendered by the same code; only the addresses differ: each
// placeholder names a local Source instead of an address.
type Config struct {
	Configurator string                       `yaml:"configurator"`
	Config       map[string]protocol.RawValue `yaml:"config"`
	IPAddresses  map[string]Source            `yaml:"ipAddresses"`
}

// Source is where one placeholder's address comes from. Static is looked at
// first; Range, when given, serves machines no static entry matches.
type Source struct {
	Static []StaticEntry `yaml:"static,omitempty"`
	Range  *Range        `yaml:"range,omitempty"`
	// Interface is where an IPv4 address is probed for duplicates. Empty
	// means the interface the template puts the placeholder on; name the
	// physical port when that is a bond or VLAN that exists only after
	// the config is applied.
	Interface string `yaml:"interface,omitempty"`
	// NoProbe skips duplicate address detection for this placeholder (a
	// VLAN whose parent carries no untagged traffic, say). A range without
	// probing hands out whatever address the identity hash points at.
	NoProbe bool `yaml:"no-probe,omitempty"`
}

// StaticEntry gives one machine its address. Exactly one of MAC, Serial and
// UUID identifies the machine.
type StaticEntry struct {
	MAC     string `yaml:"mac,omitempty"`
	Serial  string `yaml:"serial,omitempty"`
	UUID    string `yaml:"uuid,omitempty"`
	Address string `yaml:"address"`
}

// Range is a span of IPv4 addresses shared by every machine booting one
// image. Prefix and Gateway describe the segment so the walk skips its
// network, broadcast and gateway addresses; the template still writes them
// (a placeholder stands for an address only, as in the server's config).
type Range struct {
	Start   string   `yaml:"start"`
	End     string   `yaml:"end"`
	Prefix  int      `yaml:"prefix"`
	Gateway string   `yaml:"gateway,omitempty"`
	Exclude []string `yaml:"exclude,omitempty"`
}

// ConfigError names the key under Key that is wrong and why.
type ConfigError struct {
	Path   string // e.g. ipAddresses.ip.range.start
	Reason string
	Err    error // the renderer's error, when it found the problem
}

// Class: the admin's bootstrap table must change (docs/bootstrap.md).
func (e *ConfigError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *ConfigError) Cause() string { return "bootstrap network config" }

func (e *ConfigError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", Key, e.Reason)
	}
	return fmt.Sprintf("%s.%s: %s", Key, e.Path, e.Reason)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// FromConfigFile returns the bootstrap settings of an elemental config file
// (the agent's local file, never a server reply), nil when it has none, or
// a *ConfigError. Unknown keys below Key are refused so a misspelt key is
// not silently ignored on a machine that then cannot register.
func FromConfigFile(b []byte) (*Config, error) {
	doc, err := protocol.ParseYAML(b)
	if errors.Is(err, protocol.ErrYAMLTooLarge) {
		return nil, &ConfigError{Reason: err.Error(), Err: err}
	}
	if err != nil {
		return nil, &ConfigError{Reason: "config file is not YAML", Err: err}
	}
	return FromConfigNode(doc)
}

// FromConfigNode is FromConfigFile for a file already parsed (the agent
// parses its config file once per run).
func FromConfigNode(doc *yaml.Node) (*Config, error) {
	n := lookup(doc, "elemental", "registration", "bootstrap-network")
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, nil
	}
	if err := checkKeys(n, "", configKeys); err != nil {
		return nil, err
	}
	c := &Config{}
	if err := n.Decode(c); err != nil {
		// yaml.v3 lists one type error per line; keep the message on one.
		msg := strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n"), "\n", ";")
		return nil, &ConfigError{Reason: strings.TrimSpace(msg), Err: err}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Allowed keys at each level of the settings. yaml.v3 can refuse unknown
// fields only for a whole document, and its messages carry no path, so the
// check is ours: an admin who misspells "ipAddresses" learns which key and
// which line.
var (
	configKeys = keySet{"configurator": nil, "config": {}, "ipAddresses": {"*": sourceKeys}}
	sourceKeys = keySet{"static": {"[]": staticKeys}, "range": rangeKeys, "interface": nil, "no-probe": nil}
	staticKeys = keySet{"mac": nil, "serial": nil, "uuid": nil, "address": nil}
	rangeKeys  = keySet{"start": nil, "end": nil, "prefix": nil, "gateway": nil, "exclude": nil}
)

// keySet maps a key to the set of its value's keys: nil means a leaf, an
// empty set means anything (the template), "*" any key, "[]" list items.
type keySet map[string]keySet

func checkKeys(n *yaml.Node, path string, allowed keySet) error {
	if len(allowed) == 0 {
		return nil
	}
	if items, ok := allowed["[]"]; ok {
		if n.Kind != yaml.SequenceNode {
			return nil // the decoder names the type mismatch
		}
		for i, c := range n.Content {
			if err := checkKeys(c, fmt.Sprintf("%s[%d]", path, i), items); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		p := k
		if path != "" {
			p = path + "." + k
		}
		sub, ok := allowed[k]
		if !ok {
			sub, ok = allowed["*"]
		}
		if !ok {
			return &ConfigError{Path: p, Reason: fmt.Sprintf("unknown key (line %d)", n.Content[i].Line)}
		}
		if err := checkKeys(n.Content[i+1], p, sub); err != nil {
			return err
		}
	}
	return nil
}

// lookup follows mapping keys from a document node; nil when absent.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// ErrServerSent marks a server reply that carries bootstrap settings.
var ErrServerSent = errors.New("the registration server sent " + Key + ", which is local-only; ignored")

// CheckServerReply reports (as ErrServerSent) a MsgConfig payload, as
// parsed by the protocol decoder (protocol.Reply.Doc), that carries
// bootstrap settings. The agent never takes them from a server: the
// server cannot be reached before the bootstrap network is up, and letting
// it choose local addresses or probe interfaces would hand an untrusted
// peer the node's network. protocol.Config has no field for the key, so the
// settings are dropped in any case; this makes the refusal visible.
func CheckServerReply(doc *yaml.Node) error {
	if doc == nil {
		return nil // the protocol decoder reports undecodable replies
	}
	if lookup(doc, "elemental", "registration", "bootstrap-network") != nil {
		return ErrServerSent
	}
	return nil
}

// Validate checks every key and renders the template once with stand-in
// addresses through apply.Render, so a template the agent could not apply
// is refused before any probe. It also works out the probe interface of
// each IPv4 placeholder (see Source.Interface).
func (c *Config) Validate() error {
	_, err := c.validate()
	return err
}

// placeholder is what validation learns about one ipAddresses entry.
type placeholder struct {
	name     string
	src      Source
	is4      bool
	iface    string // probe interface; "" for IPv6
	static   []staticEntry
	rng      *addrRange
	sentinel netip.Addr
}

type staticEntry struct {
	kind, value string // normalised: MAC lower case with colons, UUID lower case
	addr        netip.Addr
}

func (c *Config) validate() ([]*placeholder, error) {
	switch c.Configurator {
	case protocol.ConfiguratorNmconnections, protocol.ConfiguratorNmstate:
	case "":
		return nil, &ConfigError{Path: "configurator", Reason: "missing (want nmconnections or nmstate)"}
	default:
		return nil, &ConfigError{Path: "configurator", Reason: fmt.Sprintf("%q is not nmconnections or nmstate", c.Configurator)}
	}
	if len(c.IPAddresses) == 0 {
		return nil, &ConfigError{Path: "ipAddresses", Reason: "empty: a bootstrap network needs at least one address source"}
	}
	if len(c.IPAddresses) > MaxPlaceholders {
		return nil, &ConfigError{Path: "ipAddresses", Reason: fmt.Sprintf("%d entries, more than the %d allowed", len(c.IPAddresses), MaxPlaceholders)}
	}
	names := make([]string, 0, len(c.IPAddresses))
	for n := range c.IPAddresses {
		names = append(names, n)
	}
	slices.Sort(names)
	var phs []*placeholder
	stand := map[string]string{}
	for i, name := range names {
		p, err := parseSource(name, c.IPAddresses[name])
		if err != nil {
			return nil, err
		}
		// Stand-ins from ranges nobody routes (240/4, 100::/64) so the
		// rendered template shows where each placeholder lands. Their text
		// has a fixed width (last octet 100-163, last group ab00-ab3f), so
		// no stand-in is a prefix of another when searched for in output.
		if p.is4 {
			p.sentinel = netip.AddrFrom4([4]byte{240, 0, 0, byte(100 + i)})
		} else {
			a := [16]byte{0x01}
			a[14], a[15] = 0xab, byte(i)
			p.sentinel = netip.AddrFrom16(a)
		}
		stand[name] = p.sentinel.String()
		phs = append(phs, p)
	}
	r, err := apply.Render(&protocol.NetworkConfig{Configurator: c.Configurator, Config: c.Config, IPAddresses: stand})
	if err != nil {
		path, reason := renderPath(err)
		return nil, &ConfigError{Path: path, Reason: reason, Err: err}
	}
	// Placeholders nobody uses are a typo waiting to bite: the admin
	// believes an address is configured that never reaches a keyfile.
	where := apply.InterfaceAddresses(r)
	for _, p := range phs {
		var ifaces []string
		for iface, addrs := range where {
			for _, a := range addrs {
				if strings.SplitN(a, "/", 2)[0] == p.sentinel.String() {
					ifaces = append(ifaces, iface)
				}
			}
		}
		slices.Sort(ifaces)
		ifaces = slices.Compact(ifaces)
		if !used(r, p.sentinel.String()) {
			return nil, &ConfigError{Path: "ipAddresses." + p.name, Reason: fmt.Sprintf("placeholder {%s} is not used in config", p.name)}
		}
		if !p.is4 || p.src.NoProbe {
			continue
		}
		switch {
		case p.src.Interface != "":
			p.iface = p.src.Interface
		case len(ifaces) == 1:
			p.iface = ifaces[0]
		default:
			return nil, &ConfigError{Path: "ipAddresses." + p.name + ".interface",
				Reason: fmt.Sprintf("cannot tell which interface to probe {%s} on (the template puts it on %d interfaces %v); set interface or no-probe", p.name, len(ifaces), ifaces)}
		}
	}
	return phs, nil
}

// used reports whether the stand-in address reached the rendered output.
func used(r *apply.Rendered, s string) bool {
	if bytes.Contains(r.Digested, []byte(s)) {
		return true
	}
	for _, kf := range r.Keyfiles {
		if bytes.Contains(kf.Content, []byte(s)) {
			return true
		}
	}
	return false
}

// renderPath turns the renderer's error into a path below Key.
func renderPath(err error) (string, string) {
	var fe *apply.FieldError
	if errors.As(err, &fe) {
		return fe.Path, fe.Reason
	}
	var ue *apply.UnresolvedError
	if errors.As(err, &ue) {
		return ue.Path, fmt.Sprintf("placeholder {%s} has no source in ipAddresses", ue.Placeholder)
	}
	return "config", err.Error()
}

func parseSource(name string, s Source) (*placeholder, error) {
	base := "ipAddresses." + name
	p := &placeholder{name: name, src: s}
	if len(s.Static) == 0 && s.Range == nil {
		return nil, &ConfigError{Path: base, Reason: "neither static nor range given"}
	}
	if len(s.Static) > MaxStaticEntries {
		return nil, &ConfigError{Path: base + ".static", Reason: fmt.Sprintf("%d entries, more than the %d allowed", len(s.Static), MaxStaticEntries)}
	}
	family := 0
	setFamily := func(path string, a netip.Addr) error {
		f := 6
		if a.Is4() {
			f = 4
		}
		if family != 0 && f != family {
			return &ConfigError{Path: path, Reason: "mixes IPv4 and IPv6 addresses for one placeholder (the template fixes the prefix length)"}
		}
		family = f
		return nil
	}
	seen := map[string]int{}
	for i, e := range s.Static {
		path := fmt.Sprintf("%s.static[%d]", base, i)
		se, err := parseStatic(path, e)
		if err != nil {
			return nil, err
		}
		key := se.kind + "=" + se.value
		if j, dup := seen[key]; dup {
			return nil, &ConfigError{Path: path, Reason: fmt.Sprintf("same %s as static[%d]", se.kind, j)}
		}
		seen[key] = i
		if err := setFamily(path+".address", se.addr); err != nil {
			return nil, err
		}
		p.static = append(p.static, se)
	}
	if s.Range != nil {
		r, err := parseRange(base+".range", s.Range)
		if err != nil {
			return nil, err
		}
		if err := setFamily(base+".range", r.start); err != nil {
			return nil, err
		}
		p.rng = r
	}
	if s.Interface != "" {
		if strings.ContainsAny(s.Interface, "/ \t\n") || len(s.Interface) > 15 || s.Interface == "." || s.Interface == ".." {
			return nil, &ConfigError{Path: base + ".interface", Reason: fmt.Sprintf("%q is not an interface name", s.Interface)}
		}
	}
	p.is4 = family == 4
	return p, nil
}

func parseStatic(path string, e StaticEntry) (staticEntry, error) {
	var se staticEntry
	n := 0
	if e.MAC != "" {
		n++
		mac, err := normaliseMAC(e.MAC)
		if err != nil {
			return se, &ConfigError{Path: path + ".mac", Reason: err.Error()}
		}
		se.kind, se.value = "mac", mac
	}
	if e.Serial != "" {
		n++
		se.kind, se.value = "serial", strings.TrimSpace(e.Serial)
	}
	if e.UUID != "" {
		n++
		se.kind, se.value = "uuid", strings.ToLower(strings.TrimSpace(e.UUID))
	}
	if n != 1 {
		return se, &ConfigError{Path: path, Reason: fmt.Sprintf("needs exactly one of mac, serial, uuid (has %d)", n)}
	}
	if e.Address == "" {
		return se, &ConfigError{Path: path + ".address", Reason: "missing"}
	}
	a, err := netip.ParseAddr(e.Address)
	a = a.Unmap()
	if err != nil || a.Zone() != "" || !a.IsGlobalUnicast() {
		return se, &ConfigError{Path: path + ".address", Reason: fmt.Sprintf("%q is not a unicast IP address (write the prefix length in the template)", e.Address)}
	}
	se.addr = a
	return se, nil
}
