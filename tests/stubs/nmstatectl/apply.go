package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nodereg/nodereg/nmstate"
	"gopkg.in/yaml.v3"
)

const netState = "nmstate::query_apply::net_state"
const nmProfile = "nmstate::nm::query_apply::profile"

// defaultTimeout is nmstate's checkpoint timeout when --timeout is not given.
const defaultTimeout = 60

// checkpointConflict is nmstate's text when NetworkManager already holds a
// checkpoint (14-apply-no-commit-second).
const checkpointConflict = "CheckpointConflict: Another checkpoint exists, please wait its timeout or destroy it"

var errCheckpointConflict = errors.New(checkpointConflict)

type applyOpts struct {
	noCommit, memoryOnly bool
	timeout              uint32
}

// profile is one NetworkManager connection profile, as apply sees it.
type profile struct {
	UUID   string `json:"uuid"`
	ID     string `json:"id"`
	Iface  string `json:"iface"`
	File   string `json:"file"` // keyfile name, kept across modifications
	Memory bool   `json:"memory,omitempty"`
	// What the profile configures, for the output's "already so" test.
	IPv4   ipConf   `json:"ipv4"`
	IPv6   ipConf   `json:"ipv6"`
	Routes []string `json:"routes,omitempty"` // routeKey of each route
}

// ipConf is an IP family's configuration, compared as nmstate does before
// printing: what is already so is left out of apply's output.
type ipConf struct {
	Enabled   bool     `json:"enabled"`
	DHCP      bool     `json:"dhcp,omitempty"`
	Autoconf  bool     `json:"autoconf,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
}

func randomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// nmTypeName is how nmstate's log shows a profile's type (Some(Ethernet)).
var nmTypeName = map[string]string{"802-3-ethernet": "Ethernet", "bond": "Bond", "vlan": "Vlan", "bridge": "Bridge", "dummy": "Dummy"}

func apply(desired []byte, o applyOpts) error {
	kfs, doc, err := generate(desired)
	if err != nil {
		return err
	}
	nm, err := currentBackend()
	if err != nil {
		return err
	}
	_, live := nm.(*liveBackend)
	ifaces := map[string]*yaml.Node{}
	if l := get(doc, "interfaces"); l != nil {
		for _, it := range l.Content {
			name, typ := scalarOf(get(it, "name")), scalarOf(get(it, "type"))
			ifaces[name] = it
			if st := scalarOf(get(it, "state")); st != "" && st != "up" {
				// nmstate deactivates or deletes the profile; what it
				// prints and leaves no transcript shows, offline or live.
				return declined("apply of %s with state %s", name, st)
			}
			if typ == "ethernet" || typ == "" {
				ok, err := nm.hasEthernet(name)
				if err != nil {
					return err
				}
				if !ok {
					return nmErr("InvalidArgument", "Ethernet interface %s does not exists", name)
				}
			}
		}
	}
	// What is already so, before the change: apply prints only the rest.
	current := map[string]*profile{}
	for name := range ifaces {
		if current[name], err = nm.profile(name); err != nil {
			return err
		}
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	cp, err := nm.createCheckpoint(timeout)
	if errors.Is(err, errCheckpointConflict) {
		info(netState, "Retrying on: Bug: %s", checkpointConflict)
		if live {
			time.Sleep(time.Second)
		}
		cp, err = nm.createCheckpoint(timeout)
	}
	if errors.Is(err, errCheckpointConflict) {
		return nmErr("Bug", "%s", checkpointConflict)
	}
	if err != nil {
		return err
	}
	info(netState, "Created checkpoint %s", cp)
	if err := putProfiles(nm, kfs, current, o.memoryOnly); err != nil {
		if rerr := nm.rollbackCheckpoint(cp); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	if o.noCommit {
		info(netState, "Skipping commit for checkpoint %s", cp)
	} else {
		if err := nm.destroyCheckpoint(cp); err != nil {
			return err
		}
		info(netState, "Destroyed checkpoint %s", cp)
	}
	_, err = os.Stdout.WriteString(emit(appliedState(doc, current)) + "\n")
	return err
}

func putProfiles(nm backend, kfs []nmstate.Keyfile, current map[string]*profile, memoryOnly bool) error {
	for _, kf := range kfs {
		iface := keyValue(kf.Content, "connection", "interface-name")
		id := keyValue(kf.Content, "connection", "id")
		typ := keyValue(kf.Content, "connection", "type")
		old := current[iface]
		p := &profile{ID: id, Iface: iface, File: id + ".nmconnection", Memory: memoryOnly}
		fillConf(p, kf.Content)
		create := old == nil
		if create {
			p.UUID = randomUUID()
			info(nmProfile, "Creating connection UUID Some(%q), ID Some(%q), type Some(%s) name Some(%q)", p.UUID, id, nmTypeName[typ], iface)
		} else {
			p.UUID, p.File = old.UUID, old.File
			info(nmProfile, "Modifying connection UUID Some(%q), ID Some(%q), type Some(%s) name Some(%q)", p.UUID, id, nmTypeName[typ], iface)
		}
		if err := nm.put(p, kf.Content, create, memoryOnly); err != nil {
			return err
		}
		if create {
			info(nmProfile, "Activating connection %s: %s/%s", p.UUID, iface, typ)
		} else {
			// nmstate reapplies a modified profile twice (25-rename-apply-nrnode1).
			info(nmProfile, "Reapplying connection %s: %s/%s", p.UUID, iface, typ)
			info(nmProfile, "Reapplying connection %s: %s/%s", p.UUID, iface, typ)
		}
	}
	return nil
}

// fillConf records what keyfile kf configures.
func fillConf(p *profile, kf []byte) {
	for _, fam := range []string{"ipv4", "ipv6"} {
		c := ipConfOf(fam, keyValue(kf, fam, "method"))
		for i := 0; ; i++ {
			a := keyValue(kf, fam, fmt.Sprintf("address%d", i))
			if a == "" {
				break
			}
			c.Addresses = append(c.Addresses, a)
		}
		for i := 0; ; i++ {
			r := keyValue(kf, fam, fmt.Sprintf("route%d", i))
			if r == "" {
				break
			}
			f := strings.Split(r, ",")
			gw := ""
			if len(f) > 1 {
				gw = f[1]
			}
			p.Routes = append(p.Routes, routeKey(f[0], p.Iface, gw))
		}
		if fam == "ipv4" {
			p.IPv4 = c
		} else {
			p.IPv6 = c
		}
	}
}

// ipConfOf is what a profile's method says of its family.
func ipConfOf(fam, method string) ipConf {
	switch method {
	case "manual", "link-local", "ignore":
		return ipConf{Enabled: true}
	case "auto":
		return ipConf{Enabled: true, DHCP: true, Autoconf: fam == "ipv6"}
	case "dhcp":
		return ipConf{Enabled: true, DHCP: true}
	}
	return ipConf{}
}

func routeKey(dst, iface, gw string) string { return dst + " " + iface + " " + gw }

func scalarOf(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// Field orders of nmstate's structs, as its output and its errors list
// them (08-show, 04-gc-unknown-key).
var (
	topOrder   = []string{"hostname", "dns-resolver", "route-rules", "routes", "interfaces", "ovs-db", "ovn"}
	ifaceOrder = []string{"name", "type", "profile-name", "state", "identifier", "mac-address", "mtu", "min-mtu", "max-mtu", "wait-ip", "ipv4", "ipv6",
		"mptcp", "accept-all-mac-addresses", "lldp", "ethtool"}
	addrOrder  = []string{"ip", "prefix-length"}
	routeOrder = []string{"state", "destination", "next-hop-interface", "next-hop-address", "metric", "table-id", "weight", "route-type", "cwnd", "source"}
)

// ordered copies mapping m with its keys in order first, the others after
// in their given order; sub orders the values of some keys.
func ordered(m *yaml.Node, order []string, sub func(k string, v *yaml.Node) *yaml.Node) *yaml.Node {
	out := mapping()
	add := func(k string, v *yaml.Node) {
		if sub != nil {
			v = sub(k, v)
		}
		if v != nil {
			put(out, k, v)
		}
	}
	for _, k := range order {
		if v := get(m, k); v != nil {
			add(k, v)
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i].Value; !slices.Contains(order, k) {
			add(k, m.Content[i+1])
		}
	}
	return out
}

// desiredIP is an ipv4/ipv6 mapping of the desired state as an ipConf.
func desiredIP(n *yaml.Node) ipConf {
	c := ipConf{Enabled: scalarOf(get(n, "enabled")) == "true", DHCP: scalarOf(get(n, "dhcp")) == "true", Autoconf: scalarOf(get(n, "autoconf")) == "true"}
	if l := get(n, "address"); l != nil {
		for _, a := range l.Content {
			c.Addresses = append(c.Addresses, scalarOf(get(a, "ip"))+"/"+scalarOf(get(a, "prefix-length")))
		}
	}
	if !c.Enabled {
		return ipConf{}
	}
	return c
}

func sameIP(a, b ipConf) bool {
	return a.Enabled == b.Enabled && a.DHCP == b.DHCP && a.Autoconf == b.Autoconf && slices.Equal(a.Addresses, b.Addresses)
}

// appliedState is what nmstatectl apply prints: the desired state in
// nmstate's field order, without what the interfaces already had
// (06-apply-no-commit, 25-rename-apply-nrnode1: an unchanged ipv4 and
// known routes are left out). An interface without a profile has both
// families disabled, as the recorded veths had.
func appliedState(doc *yaml.Node, current map[string]*profile) *yaml.Node {
	if doc == nil {
		doc = mapping()
	}
	known := map[string]bool{}
	for _, p := range current {
		if p != nil {
			for _, r := range p.Routes {
				known[r] = true
			}
		}
	}
	top := ordered(doc, topOrder, func(k string, v *yaml.Node) *yaml.Node {
		switch k {
		case "routes":
			return appliedRoutes(v, known)
		case "interfaces":
			l := sequence()
			for _, it := range v.Content {
				l.Content = append(l.Content, appliedIface(it, current[scalarOf(get(it, "name"))]))
			}
			return l
		}
		return v
	})
	out := mapping()
	for _, k := range topOrder {
		v := get(top, k)
		switch {
		case v != nil:
			put(out, k, v)
		case k == "route-rules", k == "routes", k == "ovn":
			// Always printed, empty when not given.
			put(out, k, mapping())
		}
	}
	return out
}

func appliedRoutes(v *yaml.Node, known map[string]bool) *yaml.Node {
	out := mapping()
	cfg := get(v, "config")
	if cfg == nil {
		return out
	}
	l := sequence()
	for _, r := range cfg.Content {
		key := routeKey(scalarOf(get(r, "destination")), scalarOf(get(r, "next-hop-interface")), scalarOf(get(r, "next-hop-address")))
		if !known[key] {
			l.Content = append(l.Content, ordered(r, routeOrder, nil))
		}
	}
	if len(l.Content) > 0 {
		put(out, "config", l)
	}
	return out
}

func appliedIface(it *yaml.Node, cur *profile) *yaml.Node {
	have := map[string]ipConf{"ipv4": {}, "ipv6": {}}
	if cur != nil {
		have["ipv4"], have["ipv6"] = cur.IPv4, cur.IPv6
	}
	return ordered(it, ifaceOrder, func(k string, v *yaml.Node) *yaml.Node {
		switch k {
		case "ipv4", "ipv6":
			if sameIP(desiredIP(v), have[k]) {
				return nil
			}
			return ordered(v, ipFields, func(k string, v *yaml.Node) *yaml.Node {
				if k != "address" {
					return v
				}
				l := sequence()
				for _, a := range v.Content {
					l.Content = append(l.Content, ordered(a, addrOrder, nil))
				}
				return l
			})
		}
		return v
	})
}
