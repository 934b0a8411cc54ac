package apply

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/protocol"

	"github.com/nodereg/nodereg/internal/errclass"
)

// UnresolvedError reports a {name} placeholder with no address in
// ipAddresses. Upstream servers can hand out a config whose claims are still
// pending (docs/protocol.md §7.1), so the agent treats this as "not ready yet".
type UnresolvedError struct {
	Placeholder string // the name between the braces
	Path        string // where it was found, e.g. config.interfaces[0].ipv4.address[0].ip
}

func (e *UnresolvedError) Error() string {
	return fmt.Sprintf("render network config: placeholder {%s} at %s has no address in ipAddresses", e.Placeholder, e.Path)
}

// FieldError reports invalid or hostile input; retrying will not help.
type FieldError struct {
	Path   string
	Reason string
	Err    error // the cause, when another package found it (e.g. *nmstate.Error)
}

// Class: the server's config must change.
func (e *FieldError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *FieldError) Cause() string { return "network config the node cannot use" }

func (e *FieldError) Error() string {
	return fmt.Sprintf("render network config: field %s: %s", e.Path, e.Reason)
}

func (e *FieldError) Unwrap() error { return e.Err }

// Keyfile is one NetworkManager connection file, named relative to the
// keyfile directory.
type Keyfile struct {
	Name    string
	Content []byte
}

// Rendered is a validated network config with every placeholder replaced.
type Rendered struct {
	// Configurator is normalised: "" becomes protocol.ConfiguratorNone.
	Configurator string
	// State is the substituted tree for nmstate and nmc; nil otherwise.
	State map[string]any
	// Digested is what is kept under /oem for humans and re-rendering: the
	// nmstate/nmc YAML, or for nmconnections a YAML map name -> keyfile.
	Digested []byte
	// Keyfiles is filled for nmconnections (sorted by name); for nmstate and
	// nmc the keyfiles come from the tool in Plan.
	Keyfiles []Keyfile
}

const keyfileSuffix = ".nmconnection"

// MaxConnections bounds the interfaces or keyfiles of one network config:
// far above any real node (a few NICs, bonds and VLANs), far below what
// would make every boot write thousands of files.
const MaxConnections = 1024

var (
	// placeholderRE finds {name} the way upstream writes them; names are what
	// a Kubernetes map key allows.
	// Both compiled on first use: package start-up stays free for the
	// commands that render nothing.
	placeholderRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{([A-Za-z0-9_.-]+)\}`) })
	nameRE        = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) })
)

// Render substitutes {name} placeholders on the parsed tree (never on text)
// and validates the result: every placeholder resolves, every address parses,
// no placeholder sits in a key, no template delimiter or control character
// reaches generated files, and file names stay inside the keyfile directory.
// Nothing else changes, but for one thing in an nmstate state: an interface
// without type: gets the type gc gives it (typeUntyped).
func Render(nc *protocol.NetworkConfig) (*Rendered, error) {
	if nc == nil {
		return &Rendered{Configurator: protocol.ConfiguratorNone}, nil
	}
	conf := nc.Configurator
	if conf == "" {
		conf = protocol.ConfiguratorNone
	}
	switch conf {
	case protocol.ConfiguratorNone:
		return &Rendered{Configurator: conf}, nil
	case protocol.ConfiguratorNmstate, protocol.ConfiguratorNmc, protocol.ConfiguratorNmconnections:
	default:
		return nil, &FieldError{Path: "configurator", Reason: fmt.Sprintf("unknown configurator %q", conf)}
	}
	if err := checkUTF8(conf, nc); err != nil {
		return nil, err
	}
	if len(nc.Config) == 0 {
		return nil, &FieldError{Path: "config", Reason: "empty for configurator " + conf}
	}
	if conf == protocol.ConfiguratorNmconnections && len(nc.Config) > MaxConnections {
		return nil, &FieldError{Path: "config", Reason: fmt.Sprintf("%d keyfiles, more than the %d allowed", len(nc.Config), MaxConnections)}
	}
	if ifaces, ok := nc.Config["interfaces"].Value.([]any); ok && len(ifaces) > MaxConnections {
		return nil, &FieldError{Path: "config.interfaces", Reason: fmt.Sprintf("%d interfaces, more than the %d allowed", len(ifaces), MaxConnections)}
	}
	r, err := newRenderer(nc.IPAddresses)
	if err != nil {
		return nil, err
	}
	out := &Rendered{Configurator: conf}
	if conf == protocol.ConfiguratorNmconnections {
		kfs, err := r.keyfiles(nc.Config)
		if err != nil {
			return nil, err
		}
		out.Keyfiles = kfs
		digest := map[string]string{}
		for _, kf := range kfs {
			digest[kf.Name] = string(kf.Content)
		}
		if out.Digested, err = marshalYAML(digest); err != nil {
			return nil, fmt.Errorf("render network config: encoding keyfiles: %w", err)
		}
		return out, nil
	}

	state := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(nc.Config)) {
		path := "config." + key
		if err := checkKey(path, key); err != nil {
			return nil, err
		}
		v, err := r.value(path, nc.Config[key].Value)
		if err != nil {
			return nil, err
		}
		state[key] = v
	}
	if conf == protocol.ConfiguratorNmstate {
		typeUntyped(state)
		if err := checkNmstate(state); err != nil {
			return nil, err
		}
		if err := checkNmstateIfnames(state); err != nil {
			return nil, err
		}
	}
	out.State = state
	if out.Digested, err = marshalYAML(state); err != nil {
		return nil, fmt.Errorf("render network config: encoding state: %w", err)
	}
	return out, nil
}

// newRenderer checks the placeholders' names and addresses.
func newRenderer(ips map[string]string) (*renderer, error) {
	r := &renderer{addrs: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(ips)) {
		path := "ipAddresses." + name
		if !nameRE().MatchString(name) {
			return nil, &FieldError{Path: path, Reason: "name is not a valid placeholder name"}
		}
		a, err := netip.ParseAddr(ips[name])
		if err != nil || a.Zone() != "" {
			return nil, &FieldError{Path: path, Reason: fmt.Sprintf("%q is not an IP address", ips[name])}
		}
		r.addrs[name] = a.String()
	}
	return r, nil
}

type renderer struct {
	addrs map[string]string
}

// value copies v with placeholders substituted in string leaves.
func (r *renderer) value(path string, v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := path + "." + k
			if err := checkKey(p, k); err != nil {
				return nil, err
			}
			c, err := r.value(p, t[k])
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			c, err := r.value(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			l[i] = c
		}
		return l, nil
	case string:
		return r.scalar(path, t)
	case nil, bool, int, int64, uint64, float64:
		return t, nil
	default:
		return nil, &FieldError{Path: path, Reason: fmt.Sprintf("unsupported value of type %T", v)}
	}
}

// scalar substitutes one string value. A value holding a placeholder must
// become exactly an address or a prefix: placeholders stand for addresses,
// and a substitution that changes anything else is refused.
func (r *renderer) scalar(path, s string) (string, error) {
	if err := checkText(path, s, false); err != nil {
		return "", err
	}
	out, n, err := r.substitute(path, s)
	if err != nil || n == 0 {
		return out, err
	}
	if _, err := netip.ParseAddr(out); err == nil {
		return out, nil
	}
	if _, err := netip.ParsePrefix(out); err == nil {
		return out, nil
	}
	return "", &FieldError{Path: path, Reason: fmt.Sprintf("substituted value %q is neither an address nor a prefix", out)}
}

// substitute replaces every {name}; n counts the replacements.
func (r *renderer) substitute(path, s string) (string, int, error) {
	var unresolved string
	n := 0
	out := placeholderRE().ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		a, ok := r.addrs[name]
		if !ok {
			if unresolved == "" {
				unresolved = name
			}
			return m
		}
		n++
		return a
	})
	if unresolved != "" {
		return "", 0, &UnresolvedError{Placeholder: unresolved, Path: path}
	}
	return out, n, nil
}

func marshalYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Digest identifies the rendered config: the same server answer gives the
// same digest, so the agent can skip planning (nmstatectl gc) and applying
// at a boot where nothing changed. Keyfiles generated from it (gc) are a
// function of it and need not be hashed.
func (r *Rendered) Digest() string {
	h := sha256.New()
	field := func(b []byte) {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	field([]byte(r.Configurator))
	field(r.Digested)
	for _, kf := range r.Keyfiles {
		field([]byte(kf.Name))
		field(kf.Content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// typeUntyped gives each interface of an nmstate state that is not absent
// and has no type: the type nmstatectl gc gives it, ethernet ("Setting
// unknown type interface eth0 to ethernet", nmstate 2.2; the built-in
// translator does the same), so that what the policy judges, what the
// generators write and what `nmstatectl apply` is handed are one kind: the
// live apply would otherwise take the kind of whatever interface of that
// name the node has (docs/nmstate.md, "An interface without type").
func typeUntyped(state map[string]any) {
	ifaces, _ := state["interfaces"].([]any)
	for _, it := range ifaces {
		iface, ok := it.(map[string]any)
		if !ok {
			continue
		}
		if _, typed := iface["type"]; typed || iface["state"] == "absent" {
			continue
		}
		iface["type"] = "ethernet"
	}
}
