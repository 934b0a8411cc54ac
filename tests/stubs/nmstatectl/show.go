package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// running is one interface as show reports it.
type running struct {
	name, typ, mac string
	up             bool
	mtu            int
	v4, v6         []string // "ip/prefix"
	profile        *profile // the active profile, nil: none
}

type showRoute struct{ dst, iface, gw string }

// show prints the running state in nmstate's layout (08-show, 09-show-eth0:
// with an interface named, its routes and itself only). The kernel's
// details nmstate reads through nispor (ethtool, mptcp, lldp) are not
// reported: the contract test's show exception.
func show(only string) error {
	var ifaces []running
	var routesRun, routesConf []showRoute
	var err error
	if nm, ok, lerr := liveNM(); lerr != nil {
		return lerr
	} else if ok {
		ifaces, routesRun, routesConf, err = nm.(*liveBackend).running()
	} else if _, modelled := os.LookupEnv("NMSTATECTL_STUB_INTERFACES"); modelled {
		ifaces, routesRun, routesConf, err = offlineRunning()
	} else {
		ifaces, routesRun, err = kernelRunning()
	}
	if err != nil {
		return err
	}
	slices.SortFunc(ifaces, func(a, b running) int { return strings.Compare(a.name, b.name) })
	top := mapping()
	if only == "" {
		host, _ := os.Hostname()
		conf, _ := os.ReadFile("/etc/hostname")
		put(top, "hostname", put(put(mapping(), "running", str(host)), "config", str(strings.TrimSpace(string(conf)))))
		put(top, "dns-resolver", put(put(mapping(), "running", put(put(mapping(), "server", sequence()), "search", sequence())), "config", mapping()))
		put(top, "route-rules", put(mapping(), "config", sequence()))
	}
	routes := mapping()
	for _, kind := range []struct {
		k string
		l []showRoute
	}{{"running", routesRun}, {"config", routesConf}} {
		l := sequence()
		for _, r := range kind.l {
			if only != "" && r.iface != only {
				continue
			}
			e := put(put(mapping(), "destination", str(r.dst)), "next-hop-interface", str(r.iface))
			if r.gw != "" {
				put(e, "next-hop-address", str(r.gw))
			}
			l.Content = append(l.Content, put(e, "table-id", raw("!!int", "254")))
		}
		put(routes, kind.k, l)
	}
	put(top, "routes", routes)
	list := sequence()
	found := false
	for _, i := range ifaces {
		if only != "" && i.name != only {
			continue
		}
		found = true
		list.Content = append(list.Content, showIface(i))
	}
	if only != "" && !found {
		return declined("show of %s, which does not exist", only)
	}
	put(top, "interfaces", list)
	if only == "" {
		put(top, "ovn", mapping())
	}
	_, err = os.Stdout.WriteString(emit(top) + "\n")
	return err
}

func showIface(i running) *yaml.Node {
	m := put(put(mapping(), "name", str(i.name)), "type", str(i.typ))
	put(m, "state", str(map[bool]string{true: "up", false: "down"}[i.up]))
	if i.mac != "" {
		put(m, "mac-address", str(strings.ToUpper(i.mac)))
	}
	if i.mtu > 0 {
		put(m, "mtu", raw("!!int", strconv.Itoa(i.mtu)))
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		addrs := i.v4
		if fam == "ipv6" {
			addrs = i.v6
		}
		ip := put(mapping(), "enabled", raw("!!bool", strconv.FormatBool(len(addrs) > 0)))
		if i.profile != nil {
			c := i.profile.IPv4
			if fam == "ipv6" {
				c = i.profile.IPv6
			}
			put(ip, "dhcp", raw("!!bool", strconv.FormatBool(c.DHCP)))
			if fam == "ipv6" {
				put(ip, "autoconf", raw("!!bool", strconv.FormatBool(c.Autoconf)))
			}
		}
		if len(addrs) > 0 {
			l := sequence()
			for _, a := range addrs {
				addr, prefix, _ := strings.Cut(a, "/")
				l.Content = append(l.Content, put(put(mapping(), "ip", str(addr)), "prefix-length", raw("!!int", prefix)))
			}
			put(ip, "address", l)
		}
		put(m, fam, ip)
	}
	return m
}

// running is NetworkManager's view of the devices and their profiles.
func (l *liveBackend) running() ([]running, []showRoute, []showRoute, error) {
	out, err := l.nmcli("-t", "-f", "GENERAL.DEVICE,GENERAL.TYPE,GENERAL.DRIVER,GENERAL.HWADDR,GENERAL.MTU,GENERAL.STATE,IP4.ADDRESS,IP4.ROUTE,IP6.ADDRESS", "device", "show")
	if err != nil {
		return nil, nil, nil, nmErr("Bug", "stub: %v", err)
	}
	var ifaces []running
	var run, conf []showRoute
	var cur *running
	flush := func() {
		if cur != nil {
			ifaces = append(ifaces, *cur)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "GENERAL.DEVICE":
			flush()
			cur = &running{name: v}
		case cur == nil:
		case k == "GENERAL.TYPE":
			cur.typ = map[string]string{"loopback": "loopback", "ethernet": "ethernet", "bond": "bond", "bridge": "linux-bridge", "vlan": "vlan", "dummy": "dummy"}[v]
		case k == "GENERAL.DRIVER" && v == "veth":
			cur.typ = "veth"
		case k == "GENERAL.HWADDR":
			cur.mac = v
		case k == "GENERAL.MTU":
			cur.mtu, _ = strconv.Atoi(v)
		case k == "GENERAL.STATE":
			cur.up = strings.HasPrefix(v, "100 ")
		case strings.HasPrefix(k, "IP4.ADDRESS"):
			cur.v4 = append(cur.v4, v)
		case strings.HasPrefix(k, "IP6.ADDRESS"):
			cur.v6 = append(cur.v6, v)
		case strings.HasPrefix(k, "IP4.ROUTE"):
			// "dst = 0.0.0.0/0, nh = 192.0.2.1, mt = 0"
			r := showRoute{iface: cur.name}
			for _, f := range strings.Split(v, ",") {
				fk, fv, _ := strings.Cut(strings.TrimSpace(f), " = ")
				switch fk {
				case "dst":
					r.dst = fv
				case "nh":
					r.gw = fv
				}
			}
			if r.gw != "" && r.gw != "0.0.0.0" {
				run = append(run, r)
			}
		}
	}
	flush()
	for i := range ifaces {
		if ifaces[i].profile, err = l.profile(ifaces[i].name); err != nil {
			return nil, nil, nil, err
		}
		if p := ifaces[i].profile; p != nil {
			for _, r := range p.Routes {
				f := strings.Split(r, " ")
				conf = append(conf, showRoute{dst: f[0], iface: f[1], gw: f[2]})
			}
		}
	}
	return ifaces, run, conf, nil
}

// offlineRunning is the offline model's machine: the veths
// NMSTATECTL_STUB_INTERFACES names (as the recorded set-up's), up with the
// addresses and routes of their profile, down without one, and lo.
func offlineRunning() ([]running, []showRoute, []showRoute, error) {
	b, err := offlineNM()
	if err != nil {
		return nil, nil, nil, err
	}
	o := b.(*offlineBackend)
	ifaces := []running{{name: "lo", typ: "loopback", up: true, mac: "00:00:00:00:00:00", mtu: 65536, v4: []string{"127.0.0.1/8"}, v6: []string{"::1/128"}}}
	var routes []showRoute
	for _, name := range strings.Split(os.Getenv("NMSTATECTL_STUB_INTERFACES"), ",") {
		i := running{name: name, typ: "veth", mtu: 1500}
		if p := o.nm.Profiles[name]; p != nil {
			i.up, i.profile, i.v4, i.v6 = true, p, p.IPv4.Addresses, p.IPv6.Addresses
			for _, r := range p.Routes {
				f := strings.Split(r, " ")
				routes = append(routes, showRoute{dst: f[0], iface: f[1], gw: f[2]})
			}
		}
		ifaces = append(ifaces, i)
	}
	return ifaces, routes, routes, nil
}

// kernelRunning is the running state without NetworkManager: the
// kernel's, of the stand-in's own network namespace.
func kernelRunning() ([]running, []showRoute, error) {
	var links []struct {
		Name     string   `json:"ifname"`
		Flags    []string `json:"flags"`
		MTU      int      `json:"mtu"`
		LinkType string   `json:"link_type"`
		Address  string   `json:"address"`
		Info     struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
		Addrs []struct {
			Family string `json:"family"`
			Local  string `json:"local"`
			Prefix int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	var routes []struct {
		Dst   string `json:"dst"`
		GW    string `json:"gateway"`
		Dev   string `json:"dev"`
		Table string `json:"table"`
	}
	for _, q := range []struct {
		args []string
		into any
	}{{[]string{"-j", "-d", "addr", "show"}, &links}, {[]string{"-j", "route", "show", "table", "main"}, &routes}} {
		out, err := exec.Command("ip", q.args...).Output()
		if err != nil {
			return nil, nil, declined("show without NetworkManager and without ip: %v", err)
		}
		if err := json.Unmarshal(out, q.into); err != nil {
			return nil, nil, declined("reading ip %s: %v", strings.Join(q.args, " "), err)
		}
	}
	var ifaces []running
	for _, l := range links {
		i := running{name: l.Name, mac: l.Address, mtu: l.MTU, typ: l.Info.Kind}
		for _, f := range l.Flags {
			i.up = i.up || f == "UP"
		}
		switch {
		case l.LinkType == "loopback":
			i.typ = "loopback"
		case i.typ == "" && l.LinkType == "ether":
			i.typ = "ethernet"
		case i.typ == "bridge":
			i.typ = "linux-bridge"
		}
		for _, a := range l.Addrs {
			s := fmt.Sprintf("%s/%d", a.Local, a.Prefix)
			if a.Family == "inet" {
				i.v4 = append(i.v4, s)
			} else if !strings.HasPrefix(a.Local, "fe80:") {
				i.v6 = append(i.v6, s)
			}
		}
		ifaces = append(ifaces, i)
	}
	var run []showRoute
	for _, r := range routes {
		if r.GW == "" {
			continue
		}
		dst := r.Dst
		if dst == "default" {
			dst = "0.0.0.0/0"
		}
		run = append(run, showRoute{dst: dst, iface: r.Dev, gw: r.GW})
	}
	return ifaces, run, nil
}
