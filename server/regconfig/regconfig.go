// Package regconfig loads and validates the reference server's YAML config
// file: registrations (token, templates, the config they hand out, a network
// template) and IP pools. See docs/regserver.md.
package regconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/ipam"
	"github.com/nodereg/nodereg/server/labeltmpl"
	"github.com/nodereg/nodereg/server/store"
)

// File is the config file as written.
type File struct {
	Registrations []Registration `yaml:"registrations"`
	Pools         []ipam.Spec    `yaml:"pools"`
}

// Registration is one MachineRegistration in miniature.
type Registration struct {
	Name string `yaml:"name"`
	// Token is the last element of the registration URL path.
	Token string `yaml:"token"`
	// MachineName is a ${…} template; empty means m-${Random/UUID}.
	MachineName                 string            `yaml:"machineName,omitempty"`
	MachineInventoryLabels      map[string]string `yaml:"machineInventoryLabels,omitempty"`
	MachineInventoryAnnotations map[string]string `yaml:"machineInventoryAnnotations,omitempty"`
	// Config is what MsgConfig returns; registration.url is filled from the
	// request when empty.
	Config protocol.Config `yaml:"config"`
	// Network's ipAddresses map a placeholder name to a pool name.
	Network *store.NetworkTemplate `yaml:"network,omitempty"`
}

// Config is a validated config file.
type Config struct {
	Registrations []Registration
	Pools         map[string]*ipam.Pool
}

// ByToken finds the registration for a URL token.
func (c *Config) ByToken(token string) (*Registration, bool) {
	for i := range c.Registrations {
		if c.Registrations[i].Token == token {
			return &c.Registrations[i], true
		}
	}
	return nil, false
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

var (
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	// placeholderRE finds {name} placeholders; ${…} label templates are
	// not placeholders and are skipped by the caller.
	placeholderRE = regexp.MustCompile(`\{([A-Za-z0-9_.-]+)\}`)
)

// Parse validates a config document. Errors name the offending key.
func Parse(data []byte) (*Config, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, err
	}
	c := &Config{Pools: map[string]*ipam.Pool{}}
	for i, ps := range f.Pools {
		p, err := ipam.New(ps)
		if err != nil {
			return nil, fmt.Errorf("pools[%d]: %w", i, err)
		}
		if _, dup := c.Pools[p.Name]; dup {
			return nil, fmt.Errorf("pools[%d].name: %q declared twice", i, p.Name)
		}
		c.Pools[p.Name] = p
	}
	if err := checkOverlaps(f.Pools, c.Pools); err != nil {
		return nil, err
	}
	if len(f.Registrations) == 0 {
		return nil, errors.New("registrations: none declared")
	}
	names, tokens := map[string]bool{}, map[string]bool{}
	for i := range f.Registrations {
		r := &f.Registrations[i]
		key := fmt.Sprintf("registrations[%d]", i)
		switch {
		case r.Name == "":
			return nil, fmt.Errorf("%s.name: empty", key)
		case names[r.Name]:
			return nil, fmt.Errorf("%s.name: %q declared twice", key, r.Name)
		case r.Token == "":
			return nil, fmt.Errorf("%s.token: empty", key)
		case !tokenRE.MatchString(r.Token):
			return nil, fmt.Errorf("%s.token: only letters, digits and . _ ~ - may appear in a URL path element", key)
		case tokens[r.Token]:
			return nil, fmt.Errorf("%s.token: used by another registration", key)
		}
		names[r.Name], tokens[r.Token] = true, true
		if err := checkRegistration(key, r, c.Pools); err != nil {
			return nil, err
		}
	}
	c.Registrations = f.Registrations
	return c, nil
}

// checkRegistration checks one registration's templates, handed-out
// config and network template.
func checkRegistration(key string, r *Registration, pools map[string]*ipam.Pool) error {
	if err := labeltmpl.Check(r.MachineName); err != nil {
		return fmt.Errorf("%s.machineName: %w", key, err)
	}
	if r.MachineName != "" && !strings.Contains(r.MachineName, "${") && labeltmpl.SanitizeName(r.MachineName) == "" {
		return fmt.Errorf("%s.machineName: %q renders to an empty name", key, r.MachineName)
	}
	for _, k := range slices.Sorted(maps.Keys(r.MachineInventoryLabels)) {
		if k == "" {
			return fmt.Errorf("%s.machineInventoryLabels: empty key", key)
		}
		if err := labeltmpl.Check(r.MachineInventoryLabels[k]); err != nil {
			return fmt.Errorf("%s.machineInventoryLabels.%s: %w", key, k, err)
		}
	}
	if err := checkHandedOut(key+".config.elemental", &r.Config.Elemental); err != nil {
		return err
	}
	if r.Network == nil {
		return nil
	}
	return checkNetwork(key, r.Network, pools)
}

// checkNetwork checks a registration's network template against the
// pools; an empty configurator becomes none.
func checkNetwork(key string, n *store.NetworkTemplate, pools map[string]*ipam.Pool) error {
	switch n.Configurator {
	case "":
		n.Configurator = protocol.ConfiguratorNone
	case protocol.ConfiguratorNone, protocol.ConfiguratorNmc, protocol.ConfiguratorNmstate, protocol.ConfiguratorNmconnections:
	default:
		return fmt.Errorf("%s.network.configurator: %q is not one of none, nmc, nmstate, nmconnections", key, n.Configurator)
	}
	for _, name := range slices.Sorted(maps.Keys(n.IPAddresses)) {
		pool := n.IPAddresses[name]
		if name == "" {
			return fmt.Errorf("%s.network.ipAddresses: empty name", key)
		}
		if _, ok := pools[pool]; !ok {
			return fmt.Errorf("%s.network.ipAddresses.%s: pool %q is not declared", key, name, pool)
		}
	}
	if n.Configurator != protocol.ConfiguratorNone && len(n.Config) == 0 {
		return fmt.Errorf("%s.network.config: empty while configurator is %s", key, n.Configurator)
	}
	for _, ph := range Placeholders(n.Config) {
		if _, ok := n.IPAddresses[ph]; !ok {
			// Every agent refuses a config with a placeholder left in it
			// (exit 78): refuse it here, before any machine gets it.
			return fmt.Errorf("%s.network.config: placeholder {%s} names no entry of ipAddresses, so it can never render", key, ph)
		}
	}
	return nil
}

// checkOverlaps refuses two pools that could hand out the same address:
// claims are kept per pool, so an address in both would go to two machines.
func checkOverlaps(specs []ipam.Spec, pools map[string]*ipam.Pool) error {
	for i := range specs {
		for j := i + 1; j < len(specs); j++ {
			a, b := pools[specs[i].Name], pools[specs[j].Name]
			if addr, ok := ipam.Overlap(a, b); ok {
				return fmt.Errorf("pools[%d]: pool %q overlaps pool %q (pools[%d]): both could hand out %s", j, b.Name, a.Name, i, addr)
			}
		}
	}
	return nil
}

// checkHandedOut refuses values of the config handed to machines that the
// agent (and elemental-register) would refuse, so an admin learns at start
// rather than from every machine.
func checkHandedOut(key string, e *protocol.Elemental) error {
	r := &e.Registration
	switch r.Auth {
	case "", "tpm", "mac", "sys-uuid":
	default:
		return fmt.Errorf("%s.registration.auth: %q is not tpm, mac or sys-uuid", key, r.Auth)
	}
	if r.URL != "" {
		if err := checkHTTPURL(r.URL); err != nil {
			return fmt.Errorf("%s.registration.url: %w", key, err)
		}
	}
	switch r.NetworkConfig {
	case "", "auto", "embedded", "explicit":
	default:
		return fmt.Errorf("%s.registration.network-config: %q is not auto, embedded or explicit", key, r.NetworkConfig)
	}
	if e.SystemAgent.URL != "" {
		if err := checkHTTPURL(e.SystemAgent.URL); err != nil {
			return fmt.Errorf("%s.system-agent.url: %w", key, err)
		}
	}
	return nil
}

// checkHTTPURL accepts an absolute http or https URL with a host, the only
// kind the agent dials.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: no host", s)
	}
	return nil
}

// CheckExternalURL validates --external-url: scheme://host[:port] with
// http or https, nothing after the authority (the request path is
// appended).
func CheckExternalURL(s string) error {
	if err := checkHTTPURL(s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q: only scheme://host[:port] is allowed", s)
	}
	return nil
}

// Placeholders lists the distinct {name} placeholders in the string leaves
// of a network config, sorted.
func Placeholders(cfg map[string]protocol.RawValue) []string {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			for _, m := range placeholderRE.FindAllStringSubmatchIndex(t, -1) {
				if m[0] > 0 && t[m[0]-1] == '$' {
					continue
				}
				seen[t[m[2]:m[3]]] = true
			}
		case map[string]any:
			for k, x := range t {
				walk(k)
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	for k, v := range cfg {
		walk(k)
		walk(v.Value)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
