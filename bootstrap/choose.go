package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"strings"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Prober tells whether an IPv4 address is in use on an interface's link.
// ARPProber is the real one.
type Prober interface {
	Probe(ctx context.Context, iface string, addr netip.Addr) (ProbeResult, error)
}

// ProbeResult is one probe's answer; Holder is the MAC of whoever claimed
// the address.
type ProbeResult struct {
	Taken  bool
	Holder net.HardwareAddr
}

// Conflict is an address found in use while walking a range.
type Conflict struct {
	Address netip.Addr
	Holder  net.HardwareAddr
}

// Choice is the outcome for one placeholder.
type Choice struct {
	Placeholder string
	Address     netip.Addr
	// FirstTry is the address tried first: the static entry's, or the
	// range address at this machine's start offset. Equal to Address
	// unless the walk moved on.
	FirstTry netip.Addr
	// Source says where Address came from, for logs and dry-run, e.g.
	// "static[2] (mac 52:54:00:31:00:02)" or "range 10.231.0.100-10.231.0.101".
	Source string
	// Interface is where Address was (or, in a preview, would be) probed;
	// "" when it is not probed (IPv6, no-probe).
	Interface string
	// Probed is false in a preview and for placeholders not probed.
	Probed bool
	// Taken lists the range addresses skipped because someone holds them.
	Taken []Conflict
}

// Plan is the bootstrap network this machine brings up.
type Plan struct {
	// Network is an ordinary network config with every placeholder
	// resolved: render it with apply.Render, like the server's.
	Network *protocol.NetworkConfig
	// Choices, one per placeholder, sorted by name.
	Choices []Choice
	// Keyfiles is where the rendered keyfiles go.
	Keyfiles KeyfileTarget
}

// TakenError says a static address is already held on the link: the
// table and the network disagree and a person has to look.
type TakenError struct {
	Placeholder string
	Address     netip.Addr
	Interface   string
	Holder      net.HardwareAddr
}

// Class: the admin's bootstrap table must change (docs/bootstrap.md).
func (e *TakenError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *TakenError) Cause() string { return "bootstrap network config" }

func (e *TakenError) Error() string {
	return fmt.Sprintf("%s.ipAddresses.%s: static address %s is already in use on %s's link by %s",
		Key, e.Placeholder, e.Address, e.Interface, e.Holder)
}

// ExhaustedError says every usable address of a range is held.
type ExhaustedError struct {
	Placeholder string
	Range       string
	Taken       []Conflict
}

// Class: another boot may find an address free.
func (e *ExhaustedError) Class() errclass.Class { return errclass.Transient }

// Cause names it on the outcome line.
func (e *ExhaustedError) Cause() string { return probeFailed }

// probeFailed is the cause of a range without a free address and of a
// probe that could not run: another boot may do better.
const probeFailed = "bootstrap range exhausted or probe failed"

func (e *ExhaustedError) Error() string {
	var held []string
	for i, c := range e.Taken {
		if i == 8 {
			held = append(held, fmt.Sprintf("and %d more", len(e.Taken)-i))
			break
		}
		held = append(held, fmt.Sprintf("%s by %s", c.Address, c.Holder))
	}
	return fmt.Sprintf("%s.ipAddresses.%s: no free address in range %s (in use: %s)",
		Key, e.Placeholder, e.Range, strings.Join(held, ", "))
}

// Choose picks this machine's bootstrap addresses: for each placeholder
// the matching static entry, else the first address of the range, walked
// from the machine's identity-derived offset, that prober finds free. A
// static IPv4 address is probed too and is an error (*TakenError) when
// held. Errors of the prober itself (interface missing or down, no
// CAP_NET_RAW) end the choice: an address is never taken as free because
// it could not be checked.
func Choose(ctx context.Context, c *Config, f Facts, prober Prober) (*Plan, error) {
	if prober == nil {
		return nil, errors.New("bootstrap: Choose needs a prober (Preview picks without probing)")
	}
	return choose(ctx, c, f, prober)
}

// Preview is Choose without probing, for agent --dry-run and agent render
// --bootstrap: the addresses a machine would try first.
func Preview(c *Config, f Facts) (*Plan, error) {
	return choose(context.Background(), c, f, nil)
}

func choose(ctx context.Context, c *Config, f Facts, prober Prober) (*Plan, error) {
	phs, err := c.validate()
	if err != nil {
		return nil, err
	}
	plan := &Plan{
		Network:  &protocol.NetworkConfig{Configurator: c.Configurator, Config: c.Config, IPAddresses: map[string]string{}},
		Keyfiles: RuntimeKeyfiles,
	}
	inUse := map[netip.Addr]bool{}
	for _, p := range phs {
		ch := Choice{Placeholder: p.name, Interface: p.iface}
		addr, idx, ok, err := selectStatic(p, f)
		switch {
		case err != nil:
			return nil, err
		case ok:
			e := p.static[idx]
			ch.Source = fmt.Sprintf("static[%d] (%s %s)", idx, e.kind, e.value)
			ch.FirstTry, ch.Address = addr, addr
			if prober != nil && p.iface != "" {
				res, err := prober.Probe(ctx, p.iface, addr)
				if err != nil {
					return nil, fmt.Errorf("%s.ipAddresses.%s: probing %s: %w", Key, p.name, addr, err)
				}
				ch.Probed = true
				if res.Taken {
					return nil, &TakenError{Placeholder: p.name, Address: addr, Interface: p.iface, Holder: res.Holder}
				}
			}
		case p.rng == nil:
			return nil, &NoMatchError{Placeholder: p.name, Entries: len(p.static), Facts: f}
		default:
			if err := walkRange(ctx, p, f, prober, inUse, &ch); err != nil {
				return nil, err
			}
		}
		inUse[ch.Address] = true
		plan.Network.IPAddresses[p.name] = ch.Address.String()
		plan.Choices = append(plan.Choices, ch)
	}
	return plan, nil
}

func walkRange(ctx context.Context, p *placeholder, f Facts, prober Prober, inUse map[netip.Addr]bool, ch *Choice) error {
	id, err := f.Identity()
	if err != nil {
		return fmt.Errorf("%s.ipAddresses.%s.range: %w", Key, p.name, err)
	}
	ch.Source = fmt.Sprintf("range %s-%s", p.rng.start, p.rng.end)
	for a := range p.rng.walk(startOffset(id)) {
		if inUse[a] {
			continue // another placeholder of this machine has it
		}
		if !ch.FirstTry.IsValid() {
			ch.FirstTry = a
		}
		if prober == nil || p.iface == "" {
			ch.Address = a
			return nil
		}
		res, err := prober.Probe(ctx, p.iface, a)
		if err != nil {
			return fmt.Errorf("%s.ipAddresses.%s: probing %s: %w", Key, p.name, a, err)
		}
		ch.Probed = true
		if !res.Taken {
			ch.Address = a
			return nil
		}
		ch.Taken = append(ch.Taken, Conflict{Address: a, Holder: res.Holder})
	}
	return &ExhaustedError{Placeholder: p.name, Range: fmt.Sprintf("%s-%s", p.rng.start, p.rng.end), Taken: ch.Taken}
}

// KeyfileTarget says where bootstrap keyfiles are written and how they are
// recognised as the agent's own.
type KeyfileTarget struct {
	// Dir is NetworkManager's runtime keyfile directory: profiles there
	// live in memory and vanish at reboot (nm-settings-keyfile(5),
	// docs/bootstrap.md), so a machine that reboots before registering
	// starts clean.
	Dir string
	// Prefix starts every file name the agent writes there; removal
	// touches only such files.
	Prefix string
	// Mode is what NetworkManager insists on for keyfiles (root-owned).
	Mode os.FileMode
}

// RuntimeKeyfiles is the one target of bootstrap keyfiles.
var RuntimeKeyfiles = KeyfileTarget{Dir: host.RuntimeKeyfileDir, Prefix: "nodereg-bootstrap-", Mode: 0o600}

// Path is where the keyfile named name (an apply.Keyfile's Name, e.g.
// "eth0.nmconnection") goes on files' machine.
func (t KeyfileTarget) Path(files host.FS, name string) string {
	return files.Path(t.hostPath(name))
}

// hostPath is the keyfile named name as a host path.
func (t KeyfileTarget) hostPath(name string) string { return path.Join(t.Dir, t.Prefix+name) }

// Owned lists the bootstrap keyfiles present in files, as paths on its
// machine: regular files named Prefix*.nmconnection. The agent uses it to
// know a bootstrap network is already up (after an exit 75) and to remove
// it once the IPAM config works.
func (t KeyfileTarget) Owned(files host.FS) ([]string, error) {
	owned, err := t.owned(files)
	return onMachine(files, owned), err
}

// owned is Owned as host paths.
func (t KeyfileTarget) owned(files host.FS) ([]string, error) {
	entries, err := files.ReadDir(t.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bootstrap: listing %s: %w", t.Dir, err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), t.Prefix) && strings.HasSuffix(e.Name(), ".nmconnection") {
			out = append(out, path.Join(t.Dir, e.Name()))
		}
	}
	return out, nil
}

// onMachine maps host paths to where they are on files' machine.
func onMachine(files host.FS, ps []string) []string {
	if ps == nil {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = files.Path(p)
	}
	return out
}

// Print writes what the plan means, for agent --dry-run and agent render
// --bootstrap; the keyfiles themselves are printed by apply's plan.
func (p *Plan) Print(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bootstrap network (%s, configurator %s)\n", Key, p.Network.Configurator)
	for _, c := range p.Choices {
		fmt.Fprintf(&b, "  {%s}: ", c.Placeholder)
		switch {
		case c.Probed && c.FirstTry != c.Address:
			fmt.Fprintf(&b, "%s from %s, first tried %s", c.Address, c.Source, c.FirstTry)
		case c.Probed:
			fmt.Fprintf(&b, "%s from %s", c.Address, c.Source)
		default:
			fmt.Fprintf(&b, "first try %s from %s", c.FirstTry, c.Source)
		}
		switch {
		case c.Interface == "":
			b.WriteString(", not probed\n")
		case c.Probed:
			fmt.Fprintf(&b, ", free on %s\n", c.Interface)
		default:
			fmt.Fprintf(&b, ", probed on %s before use\n", c.Interface)
		}
		for _, t := range c.Taken {
			fmt.Fprintf(&b, "    %s in use by %s\n", t.Address, t.Holder)
		}
	}
	fmt.Fprintf(&b, "  keyfiles: %s/%s<name>.nmconnection, mode %04o, gone at reboot\n", p.Keyfiles.Dir, p.Keyfiles.Prefix, p.Keyfiles.Mode)
	_, err := io.WriteString(w, b.String())
	return err
}

// Write puts rendered keyfiles (apply's, for either configurator) into the
// target in files, each atomically with Mode, creating the directory
// (0755, as NetworkManager creates it) when missing. It returns the paths
// written (as on files' machine), for nmcli connection load / activation by file. On error
// the files this call wrote are removed again: a half-written bootstrap
// would come up with some interfaces only.
func (t KeyfileTarget) Write(files host.FS, kfs []apply.Keyfile) (paths []string, err error) {
	dir := files.Path(t.Dir)
	if err := files.MkdirAll(t.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("bootstrap: creating %s: %w", dir, err)
	}
	var written []string
	defer func() {
		if err != nil {
			for _, p := range written {
				_ = files.Remove(p)
			}
			paths = nil
		}
	}()
	for _, kf := range kfs {
		if kf.Name == "" || strings.ContainsAny(kf.Name, `/\`) || strings.HasPrefix(kf.Name, ".") {
			return paths, fmt.Errorf("bootstrap: keyfile name %q would leave %s", kf.Name, dir)
		}
		p := t.hostPath(kf.Name)
		if err := files.WriteFile(p, kf.Content, t.Mode); err != nil {
			return paths, fmt.Errorf("bootstrap: %w", err)
		}
		written = append(written, p)
		paths = append(paths, files.Path(p))
	}
	return paths, nil
}

// Remove deletes the bootstrap keyfiles in files (Owned) and nothing
// else; the agent then reloads NetworkManager's profiles.
func (t KeyfileTarget) Remove(files host.FS) ([]string, error) {
	owned, err := t.owned(files)
	if err != nil {
		return nil, err
	}
	for i, p := range owned {
		if err := files.Remove(p); err != nil {
			return onMachine(files, owned[:i]), fmt.Errorf("bootstrap: %w", err)
		}
	}
	return onMachine(files, owned), nil
}
