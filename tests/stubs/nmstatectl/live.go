package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// liveBackend is a real NetworkManager on the private bus the environment
// names: profiles through nmcli, checkpoints through NetworkManager's D-Bus
// API (busctl), as nmstate does them, so NetworkManager writes its own
// keyfiles and rolls them back itself.
type liveBackend struct {
	address string // the D-Bus address
}

// liveNM is the NetworkManager on DBUS_SYSTEM_BUS_ADDRESS. Unset: none (the
// stand-in never acts on the machine's own NetworkManager). Set without a
// NetworkManager answering there: an error, as the real tool's.
func liveNM() (backend, bool, error) {
	addr := os.Getenv("DBUS_SYSTEM_BUS_ADDRESS")
	if addr == "" {
		return nil, false, nil
	}
	l := &liveBackend{address: addr}
	out, err := l.nmcli("-g", "RUNNING", "general")
	if err != nil || strings.TrimSpace(out) != "running" {
		return nil, false, nmErr("Bug", "stub: no NetworkManager answers on DBUS_SYSTEM_BUS_ADDRESS=%s: %v", addr, err)
	}
	return l, true, nil
}

func (l *liveBackend) env() []string {
	return append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+l.address)
}

// nmcli runs nmcli without escaping in its terse output: the fields the
// stand-in reads several to a line (names, UUIDs, types, paths) hold no
// colon, and a line of one field is cut at its first.
func (l *liveBackend) nmcli(args ...string) (string, error) {
	c := exec.Command("nmcli", append([]string{"-e", "no"}, args...)...)
	c.Env = l.env()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("nmcli %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

const (
	nmService = "org.freedesktop.NetworkManager"
	nmPath    = "/org/freedesktop/NetworkManager"
)

func (l *liveBackend) busctl(args ...string) (string, error) {
	c := exec.Command("busctl", append([]string{"--address=" + l.address}, args...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("busctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (l *liveBackend) hasEthernet(name string) (bool, error) {
	out, err := l.nmcli("-t", "-f", "DEVICE,TYPE", "device")
	if err != nil {
		return false, nmErr("Bug", "stub: %v", err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ":")
		if len(f) == 2 && f[0] == name {
			if f[1] == "ethernet" || f[1] == "veth" {
				return true, nil
			}
			// No transcript applies an ethernet to a device of another
			// type: transcript 12's "does not exists" is for a missing one.
			return false, declined("apply of ethernet %s to a %s device", name, f[1])
		}
	}
	return false, nil
}

// profile is the profile nmstate would modify for iface: the one active on
// the device, else one bound to its name.
func (l *liveBackend) profile(iface string) (*profile, error) {
	out, err := l.nmcli("-g", "GENERAL.CON-UUID", "device", "show", iface)
	uuid := strings.TrimSpace(out)
	if err != nil || uuid == "" {
		uuid = ""
		list, err := l.nmcli("-t", "-f", "UUID,TYPE", "connection", "show")
		if err != nil {
			return nil, nmErr("Bug", "stub: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			f := strings.Split(line, ":")
			if len(f) != 2 || f[1] == "loopback" {
				continue
			}
			if name, err := l.nmcli("-g", "connection.interface-name", "connection", "show", "uuid", f[0]); err == nil && strings.TrimSpace(name) == iface {
				uuid = f[0]
				break
			}
		}
	}
	if uuid == "" {
		return nil, nil
	}
	out, err = l.nmcli("-t", "-f", "connection.id,connection.uuid,ipv4.method,ipv4.addresses,ipv4.routes,ipv6.method,ipv6.addresses,ipv6.routes",
		"connection", "show", "uuid", uuid)
	if err != nil {
		return nil, nmErr("Bug", "stub: %v", err)
	}
	v := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, val, ok := strings.Cut(line, ":"); ok {
			v[k] = val
		}
	}
	files, err := l.nmcli("-t", "-f", "UUID,FILENAME", "connection", "show")
	if err != nil {
		return nil, nmErr("Bug", "stub: %v", err)
	}
	for _, line := range strings.Split(files, "\n") {
		if f := strings.Split(line, ":"); len(f) == 2 && f[0] == uuid {
			v["GENERAL.FILENAME"] = filepath.Base(f[1])
		}
	}
	p := &profile{UUID: uuid, ID: v["connection.id"], Iface: iface, File: v["GENERAL.FILENAME"]}
	for _, fam := range []string{"ipv4", "ipv6"} {
		c := ipConfOf(fam, v[fam+".method"])
		for _, a := range strings.Split(v[fam+".addresses"], ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Addresses = append(c.Addresses, a)
			}
		}
		for _, r := range strings.Split(v[fam+".routes"], ",") {
			// nmcli -t: "0.0.0.0/0 192.0.2.1 0 table=254"
			f := strings.Fields(r)
			if len(f) == 0 {
				continue
			}
			gw := ""
			if len(f) > 1 && !strings.Contains(f[1], "=") {
				gw = f[1]
			}
			p.Routes = append(p.Routes, routeKey(f[0], iface, gw))
		}
		if fam == "ipv4" {
			p.IPv4 = c
		} else {
			p.IPv6 = c
		}
	}
	return p, nil
}

// nmstate's checkpoint flags: delete new connections, disconnect new
// devices on rollback (a rollback removes the profiles apply created, 11).
const checkpointFlags = "6"

var settingsPath = regexp.MustCompile(`"(/org/freedesktop/NetworkManager/Settings/\d+)"`)

var objectPath = regexp.MustCompile(`"(/org/freedesktop/NetworkManager/Checkpoint/\d+)"`)

func (l *liveBackend) createCheckpoint(timeout uint32) (string, error) {
	out, err := l.busctl("call", nmService, nmPath, nmService, "CheckpointCreate", "aouu", "0", fmt.Sprint(timeout), checkpointFlags)
	if err != nil {
		if strings.Contains(err.Error(), "already included in checkpoint") || strings.Contains(err.Error(), "already exists") {
			return "", errCheckpointConflict
		}
		return "", nmErr("Bug", "stub: %v", err)
	}
	m := objectPath.FindStringSubmatch(out)
	if m == nil {
		return "", nmErr("Bug", "stub: CheckpointCreate answered %q", out)
	}
	return m[1], nil
}

func (l *liveBackend) checkpoints() ([]string, error) {
	out, err := l.busctl("get-property", nmService, nmPath, nmService, "Checkpoints")
	if err != nil {
		return nil, nmErr("Bug", "stub: %v", err)
	}
	var cps []string
	for _, m := range objectPath.FindAllStringSubmatch(out, -1) {
		cps = append(cps, m[1])
	}
	return cps, nil
}

func (l *liveBackend) destroyCheckpoint(cp string) error {
	if _, err := l.busctl("call", nmService, nmPath, nmService, "CheckpointDestroy", "o", cp); err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	return nil
}

func (l *liveBackend) rollbackCheckpoint(cp string) error {
	if _, err := l.busctl("call", nmService, nmPath, nmService, "CheckpointRollback", "o", cp); err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	// As nmstate, return once the devices rolled back have settled: a
	// profile the rollback deletes is gone only when its device is down.
	for deadline := time.Now().Add(rollbackSettle); ; time.Sleep(100 * time.Millisecond) {
		out, err := l.nmcli("-t", "-f", "STATE", "device")
		if err == nil && !strings.Contains(out, "activating") && !strings.Contains(out, "deactivating") {
			return nil
		}
		if time.Now().After(deadline) {
			return nmErr("Bug", "stub: the devices did not settle %v after the rollback: %s %v", rollbackSettle, out, err)
		}
	}
}

// rollbackSettle bounds the wait for the devices after a rollback.
const rollbackSettle = 30 * time.Second

// liveTypes are the profile types the live mode sends to NetworkManager,
// by gc's type, with nmcli's name.
var liveTypes = map[string]string{"802-3-ethernet": "ethernet", "bridge": "bridge", "bond": "bond", "vlan": "vlan", "dummy": "dummy"}

// sectionSettings are nmcli's setting names of gc's keyfile sections whose
// keys are nmcli's property names ([bond] is bond.options, apart).
var sectionSettings = map[string]string{"ethernet": "802-3-ethernet", "bridge": "bridge", "bridge-port": "bridge-port", "vlan": "vlan"}

// put sends gc's keyfile to NetworkManager as nmstate sends its profile:
// the same settings, NetworkManager's own UUID handling and file.
func (l *liveBackend) put(p *profile, kf []byte, create, memoryOnly bool) error {
	typ := keyValue(kf, "connection", "type")
	nmType, ok := liveTypes[typ]
	if !ok {
		return declined("applying a %s profile to NetworkManager", typ)
	}
	props, err := nmcliSettings(kf, create)
	if err != nil {
		return err
	}
	var args []string
	if create {
		args = append([]string{"connection", "add", "type", nmType, "ifname", p.Iface, "con-name", p.ID, "connection.uuid", p.UUID}, props...)
		if memoryOnly {
			args = append(args, "save", "no")
		}
	} else {
		args = []string{"connection", "modify"}
		if memoryOnly {
			args = append(args, "--temporary")
		}
		args = append(append(args, "uuid", p.UUID, "connection.id", p.ID), props...)
	}
	if _, err := l.nmcli(args...); err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	if err := l.setUserData(p.UUID, kf); err != nil {
		return err
	}
	if create {
		_, err = l.nmcli("connection", "up", "uuid", p.UUID)
	} else if _, err = l.nmcli("device", "reapply", p.Iface); err != nil {
		// What reapply cannot take needs the profile brought up again.
		_, err = l.nmcli("connection", "up", "uuid", p.UUID)
	}
	if err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	return nil
}

// nmcliSettings are the nmcli properties of gc's keyfile kf. A created
// profile's routes go without their table (NetworkManager's file then has
// no route1_options, 06-apply-no-commit); a modified one's carry table=254
// as nmstate's merge with the running state gives them
// (25-rename-apply-nrnode1).
func nmcliSettings(kf []byte, create bool) ([]string, error) {
	var props []string
	for _, fam := range []string{"ipv4", "ipv6"} {
		var addrs, routes, rules []string
		sec := keyfileSection(kf, fam)
		for _, kv := range sec {
			k, v := kv[0], kv[1]
			switch {
			case strings.HasPrefix(k, "address"):
				addrs = append(addrs, v)
			case strings.HasPrefix(k, "route") && strings.HasSuffix(k, "_options"):
			case strings.HasPrefix(k, "routing-rule"):
				rules = append(rules, v)
			case strings.HasPrefix(k, "route"):
				f := strings.Split(v, ",")
				r := strings.Join(f, " ")
				opts := optionsOf(sec, k+"_options")
				if !create && !strings.Contains(opts, "table=") {
					opts = strings.TrimPrefix(opts+",table=254", ",")
				}
				if opts != "" && !(create && opts == "table=254") {
					r += " " + strings.ReplaceAll(opts, ",", " ")
				}
				routes = append(routes, r)
			case k == "dns":
				props = append(props, fam+".dns", strings.Join(strings.FieldsFunc(v, func(r rune) bool { return r == ';' }), ","))
			case k == "dns-search":
				props = append(props, fam+".dns-search", strings.Join(strings.FieldsFunc(v, func(r rune) bool { return r == ';' }), ","))
			case k == "addr-gen-mode":
				props = append(props, fam+".addr-gen-mode", map[string]string{"0": "eui64", "1": "stable-privacy"}[v])
			default:
				props = append(props, fam+"."+k, v)
			}
		}
		if !create || len(addrs) > 0 {
			props = append(props, fam+".addresses", strings.Join(addrs, ","))
		}
		if !create || len(routes) > 0 {
			props = append(props, fam+".routes", strings.Join(routes, ","))
		}
		if !create || len(rules) > 0 {
			props = append(props, fam+".routing-rules", strings.Join(rules, ","))
		}
	}
	for _, kv := range keyfileSection(kf, "connection") {
		switch kv[0] {
		case "id", "uuid", "type", "interface-name":
		case "autoconnect-slaves":
			if kv[1] != "-1" {
				props = append(props, "connection.autoconnect-slaves", kv[1])
			}
		case "autoconnect", "master", "slave-type":
			props = append(props, "connection."+kv[0], kv[1])
		default:
			return nil, declined("applying [connection] %s to NetworkManager", kv[0])
		}
	}
	for _, sec := range keyfileSections(kf) {
		if slices.Contains([]string{"connection", "ipv4", "ipv6"}, sec) {
			continue
		}
		kvs := keyfileSection(kf, sec)
		if sec == "bond" {
			var opts []string
			for _, kv := range kvs {
				opts = append(opts, kv[0]+"="+kv[1])
			}
			props = append(props, "bond.options", strings.Join(opts, ","))
			continue
		}
		if sec == "user" {
			continue // setUserData
		}
		setting, ok := sectionSettings[sec]
		if !ok {
			return nil, declined("applying [%s] to NetworkManager", sec)
		}
		for _, kv := range kvs {
			props = append(props, setting+"."+kv[0], kv[1])
		}
	}
	return props, nil
}

func optionsOf(sec [][2]string, k string) string {
	for _, kv := range sec {
		if kv[0] == k {
			return kv[1]
		}
	}
	return ""
}

func keyfileSections(kf []byte) []string {
	var out []string
	for _, l := range strings.Split(string(kf), "\n") {
		if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
			out = append(out, l[1:len(l)-1])
		}
	}
	return out
}

func keyfileSection(kf []byte, sec string) [][2]string {
	var out [][2]string
	in := false
	for _, l := range strings.Split(string(kf), "\n") {
		if strings.HasPrefix(l, "[") {
			in = l == "["+sec+"]"
			continue
		}
		if k, v, ok := strings.Cut(l, "="); in && ok {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
