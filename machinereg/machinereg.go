// Package machinereg reads what `agent render -f` is given: a
// NetworkConfig as a node receives it, or elemental-operator's
// MachineRegistration (the whole resource, or its spec.config.network),
// whose ipAddresses name an IPAM pool per placeholder instead of an
// address (docs/protocol.md §7.1). Resolve turns the latter into the
// NetworkConfig a node of that registration gets once its claims are
// bound: the operator copies only each IPAddress's address into
// ipAddresses (docs/rancher.md, "Render the template as the node will").
package machinereg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/termsafe"
	"github.com/nodereg/nodereg/protocol"
)

// The sample addresses for placeholders no --set names: TEST-NET-1
// (RFC 5737), never routed, from .10 up in the placeholders' name order.
const (
	SampleNet   = "192.0.2.0/24"
	SampleFirst = "192.0.2.10"
	// maxSamples: a template with more placeholders names them all.
	maxSamples = 200
)

// PoolRef is a placeholder's pool, a TypedLocalObjectReference.
type PoolRef struct {
	APIGroup string `yaml:"apiGroup"`
	Kind     string `yaml:"kind"`
	Name     string `yaml:"name"`
}

func (p PoolRef) String() string { return termsafe.Quote(p.Kind) + " " + termsafe.Quote(p.Name) }

// template is the operator's NetworkTemplate (spec.config.network).
type template struct {
	Configurator string                       `yaml:"configurator"`
	IPAddresses  map[string]PoolRef           `yaml:"ipAddresses"`
	Config       map[string]protocol.RawValue `yaml:"config"`
}

// Input is what was read: the network config, and for a template the
// pool of each placeholder (nil for a NetworkConfig, whose ipAddresses
// are addresses already). What says where it came from, for messages.
type Input struct {
	Network protocol.NetworkConfig
	Pools   map[string]PoolRef
	What    string
}

// Assigned is the address Resolve gave a placeholder, and why.
type Assigned struct {
	Name, Address string
	Sample        bool // no --set named it
	Pool          PoolRef
}

// Parse reads b: a MachineRegistration (kind MachineRegistration of
// elemental.cattle.io), its spec.config.network, or a NetworkConfig. A key
// none of them has is an error naming it.
func Parse(b []byte) (*Input, error) {
	// One budget for the whole document (aliases expanded), not one per
	// value: a few KB of anchors each used by many values ran for minutes.
	doc, err := protocol.ParseYAML(b)
	if err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a YAML mapping: " + Shapes)
	}
	top := doc.Content[0]
	in := &Input{What: "NetworkConfig"}
	net := top
	if kind := value(top, "kind"); kind != nil {
		if kind.Value != "MachineRegistration" || !strings.HasPrefix(scalar(value(top, "apiVersion")), "elemental.cattle.io/") {
			return nil, fmt.Errorf("kind %s (apiVersion %s): %s", kind.Value, scalar(value(top, "apiVersion")), Shapes)
		}
		meta := value(top, "metadata")
		// The resource's own strings: quoted if they would act on the
		// terminal that prints them.
		in.What = "MachineRegistration " + termsafe.Quote(scalar(value(meta, "namespace"))+"/"+scalar(value(meta, "name")))
		if net = value(value(value(top, "spec"), "config"), "network"); net == nil {
			return nil, fmt.Errorf("%s has no spec.config.network: the node gets no network config from it", in.What)
		}
		in.What += " spec.config.network"
	}
	if !poolsByName(net) {
		return in, decodeStrict(net, &in.Network, networkConfigKeys)
	}
	var t template
	if err := decodeStrict(net, &t, templateKeys); err != nil {
		return nil, err
	}
	if in.What == "NetworkConfig" {
		in.What = "network template (a MachineRegistration's spec.config.network)"
	}
	in.Network = protocol.NetworkConfig{Configurator: t.Configurator, Config: t.Config}
	in.Pools = t.IPAddresses
	return in, nil
}

// Shapes says what render takes.
const Shapes = "render takes a NetworkConfig (configurator, ipAddresses: placeholder to address, config), " +
	"a MachineRegistration (kind MachineRegistration, apiVersion elemental.cattle.io/...) or its spec.config.network " +
	"(ipAddresses: placeholder to IPAM pool; give the addresses with --set NAME=ADDRESS)"

const (
	networkConfigKeys = "a NetworkConfig has the keys configurator (nmstate, nmconnections, nmc or none), " +
		"ipAddresses (placeholder to address, as the node gets it) and config (the template)"
	templateKeys = "a MachineRegistration's spec.config.network has the keys configurator, " +
		"ipAddresses (placeholder to {apiGroup, kind, name} of an IPAM pool) and config (the template)"
)

// poolsByName: the ipAddresses values are pool references (mappings),
// not addresses.
func poolsByName(net *yaml.Node) bool {
	ips := value(net, "ipAddresses")
	if ips == nil || ips.Kind != yaml.MappingNode {
		return false
	}
	for i := 1; i < len(ips.Content); i += 2 {
		if ips.Content[i].Kind == yaml.MappingNode {
			return true
		}
	}
	return false
}

// decodeStrict decodes n into v refusing unknown keys (yaml.v3 does that
// for a whole document only), keys naming what the section holds.
func decodeStrict(n *yaml.Node, v any, keys string) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w (%s)", err, keys)
	}
	return nil
}

func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// Resolve is the NetworkConfig a node gets: for a template, each
// placeholder's address from set (NAME → ADDRESS or ADDRESS/PREFIX; the
// prefix is checked and dropped, as the operator sends the address only),
// else a sample address; for a NetworkConfig, set overrides or adds
// addresses. A set name a template has no pool for is an error.
func (in *Input) Resolve(set map[string]string) (*protocol.NetworkConfig, []Assigned, error) {
	nc := in.Network
	nc.IPAddresses = maps.Clone(in.Network.IPAddresses)
	if nc.IPAddresses == nil {
		nc.IPAddresses = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if _, ok := in.Pools[name]; in.Pools != nil && !ok {
			return nil, nil, fmt.Errorf("--set %s: the %s has no placeholder %s (it has %s)", name, in.What, name, strings.Join(in.names(nil), ", "))
		}
	}
	var out []Assigned
	sample := netip.MustParseAddr(SampleFirst)
	for _, name := range in.names(set) {
		a := Assigned{Name: name, Pool: in.Pools[name]}
		switch v, ok := set[name]; {
		case ok:
			addr, err := address(v)
			if err != nil {
				return nil, nil, fmt.Errorf("--set %s=%s: %w", name, v, err)
			}
			a.Address = addr
		case in.Pools != nil:
			if len(out) >= maxSamples {
				return nil, nil, fmt.Errorf("%d placeholders: give their addresses with --set", len(in.Pools))
			}
			a.Address, a.Sample = sample.String(), true
			sample = sample.Next()
		default:
			a.Address = nc.IPAddresses[name]
		}
		nc.IPAddresses[name] = a.Address
		out = append(out, a)
	}
	return &nc, out, nil
}

// names are the input's placeholders, sorted: the pools' for a template,
// for a NetworkConfig its addresses' and set's (which may add one).
func (in *Input) names(set map[string]string) []string {
	if in.Pools != nil {
		return slices.Sorted(maps.Keys(in.Pools))
	}
	all := maps.Clone(in.Network.IPAddresses)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, set)
	return slices.Sorted(maps.Keys(all))
}

// address is ADDRESS or ADDRESS/PREFIX as an address.
func address(s string) (string, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return "", errors.New("not an IP address (ADDRESS or ADDRESS/PREFIX)")
	}
	return a.String(), nil
}
