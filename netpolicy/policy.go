// Package netpolicy is what a registration server's network config may do
// to the node, judged before any keyfile is written (docs/reliability.md,
// "Network-config policy"). The server is untrusted: its config may set
// addresses, routes, DNS and link settings of the interfaces the agent
// supports, and nothing that names a local file or secret, runs a script,
// sets the hostname or a proxy, restricts who may use a profile, or that the
// policy does not know, unless the node's own config allows that rule.
// Keyfiles are read as NetworkManager reads them (internal/keyfile: GLib's
// key-file format, NetworkManager 1.42's reading of the keys judged), so names and UUIDs are judged as NetworkManager will see them,
// and a profile must not share a UUID or an id with one NetworkManager
// already loads from elsewhere.
//
// It works on plain data (the rendered nmstate tree, keyfile bytes, a list of
// profiles read through the host edge); of this module it imports only
// internal/host and internal/keyfile.
package netpolicy

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Rule names one thing the policy refuses.
type Rule string

// The rules a local config may allow (docs/reliability.md).
const (
	// FilesAndSecrets: anything naming a local file or carrying a secret
	// (802.1x, VPN, WireGuard, MACsec, certificates, keys, passwords).
	FilesAndSecrets Rule = "files-and-secrets"
	// Scripts: nmstate dispatch scripts, PAC scripts.
	Scripts Rule = "scripts"
	// Hostname: the node's hostname (nmstate hostname, a keyfile's [hostname]).
	Hostname Rule = "hostname"
	// Proxy: proxy settings (a keyfile's [proxy] other than method=none).
	Proxy Rule = "proxy"
	// Permissions: connection.permissions (who may use a profile).
	Permissions Rule = "permissions"
	// Unknown: keys, keyfile sections and interface kinds the policy does
	// not know to be harmless.
	Unknown Rule = "unknown"
)

// The rules no config can allow: breaking them gives a profile
// NetworkManager refuses or one that hides another.
const (
	// Names: a value NetworkManager would read differently from what was
	// checked, or refuse (escapes, interface names, UUIDs).
	Names Rule = "names"
	// Unique: a UUID or an id NetworkManager already has, or two profiles
	// of the config sharing one.
	Unique Rule = "unique"
	// VLANCycle: a VLAN whose parent is, through other VLANs, itself.
	VLANCycle Rule = "vlan-cycle"
)

// OptIn are the rules a local config may allow.
var OptIn = []Rule{FilesAndSecrets, Scripts, Hostname, Proxy, Permissions, Unknown, Shared, Zone, MatchWildcard, AnyDevice}

// Key is the local config's key for the policy. Like the other keep-local
// keys it is never taken from a server.
const Key = "elemental.registration.network-policy"

// Policy is the node's policy. The zero value allows none of OptIn.
type Policy struct {
	// Allow lists the OptIn rules the local config lifts.
	Allow []Rule `yaml:"allow"`
	// OwnedPrefixes are host paths (without the root) of profiles the agent
	// owns outside its manifest, such as its bootstrap profiles under /run:
	// they are not foreign.
	OwnedPrefixes []string `yaml:"-"`
}

func (p Policy) allows(r Rule) bool { return slices.Contains(p.Allow, r) }

// Refusal is the policy saying no: the key path, the rule and why. The agent
// exits 78 on it (a person must change the server's config, or the node's
// policy for an opt-in rule).
type Refusal struct {
	Path   string // e.g. config.interfaces[0].802.1x or config.eth0 [802-1x]
	Rule   Rule
	Reason string
}

// Class: the server's config or the node's policy must change.
func (e *Refusal) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *Refusal) Cause() string { return "network policy" }

func (e *Refusal) Error() string {
	s := fmt.Sprintf("network policy refuses %s: %s (rule %s)", e.Path, e.Reason, e.Rule)
	if slices.Contains(OptIn, e.Rule) {
		s += fmt.Sprintf("; the node's config can allow it: %s: {allow: [%s]}", Key, e.Rule)
	}
	return s
}

// refuse is a Refusal unless the rule is allowed.
func (p Policy) refuse(path string, r Rule, format string, a ...any) error {
	if p.allows(r) {
		return nil
	}
	return &Refusal{Path: path, Rule: r, Reason: fmt.Sprintf(format, a...)}
}

// ConfigError is a policy key of the local config that cannot be read.
type ConfigError struct {
	Where string
	Err   error
}

// Class: the node's config must change.
func (e *ConfigError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *ConfigError) Cause() string { return "configuration" }

func (e *ConfigError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Where, Key, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

type localFile struct {
	Elemental struct {
		Registration struct {
			Policy yaml.Node `yaml:"network-policy"`
		} `yaml:"registration"`
	} `yaml:"elemental"`
}

// FromConfigNode reads the policy from the local config file, already
// parsed (doc) under its YAML budget, so the file is parsed once
// (agent/localconfig); file names it in errors. No key: the zero Policy.
func FromConfigNode(file string, doc *yaml.Node) (Policy, error) {
	var lf localFile
	if doc.Kind != 0 {
		if err := doc.Decode(&lf); err != nil {
			return Policy{}, &ConfigError{Where: file, Err: err}
		}
	}
	n := &lf.Elemental.Registration.Policy
	if n.Kind == 0 {
		return Policy{}, nil
	}
	var p Policy
	dec := struct {
		Allow []string `yaml:"allow"`
	}{}
	if n.Kind != yaml.MappingNode {
		return Policy{}, &ConfigError{Where: file, Err: fmt.Errorf("line %d: want a mapping with allow: [rules]", n.Line)}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "allow" {
			return Policy{}, &ConfigError{Where: file, Err: fmt.Errorf("line %d: unknown key %q (only allow)", n.Content[i].Line, k)}
		}
	}
	if err := n.Decode(&dec); err != nil {
		return Policy{}, &ConfigError{Where: file, Err: err}
	}
	for _, s := range dec.Allow {
		r := Rule(s)
		if !slices.Contains(OptIn, r) {
			return Policy{}, &ConfigError{Where: file, Err: fmt.Errorf("allow: %q is not a rule that can be allowed (%s)", s, ruleList(OptIn))}
		}
		p.Allow = append(p.Allow, r)
	}
	return p, nil
}

func ruleList(rs []Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// ServerSentWarning is the warning for a server reply (a MsgConfig payload,
// as parsed by the protocol decoder: protocol.Reply.Doc) carrying the
// policy key; "" when it does not. protocol.Config has no field for it, so
// it is dropped in any case: this makes it visible.
func ServerSentWarning(doc *yaml.Node) string {
	var lf localFile
	if doc == nil || doc.Decode(&lf) != nil || lf.Elemental.Registration.Policy.Kind == 0 {
		return ""
	}
	return "the server's " + Key + " is ignored: the network policy is a local setting; set it in the local config"
}

// Owning is p with more host-path prefixes of profiles the agent owns.
func (p Policy) Owning(prefixes ...string) Policy {
	p.OwnedPrefixes = append(slices.Clone(p.OwnedPrefixes), prefixes...)
	return p
}
