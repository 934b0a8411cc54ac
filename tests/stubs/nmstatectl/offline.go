package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// offlineBackend models the recorded NetworkManager in files: the pending
// checkpoint in NMSTATECTL_STUB_STATE (it exists while one is pending,
// holding the profiles to go back to) and the profiles in STATE.nm.json.
// It writes no keyfile: there is no NetworkManager to write one.
type offlineBackend struct {
	state string
	nm    offlineNMState
}

type offlineNMState struct {
	Checkpoints int                 `json:"checkpoints"` // checkpoints made, for their numbers
	Profiles    map[string]*profile `json:"profiles"`    // by interface
}

type offlineCheckpoint struct {
	Path   string              `json:"path"`
	Before map[string]*profile `json:"before"`
}

func offlineNM() (backend, error) {
	p := os.Getenv("NMSTATECTL_STUB_STATE")
	if p == "" {
		return nil, &exitError{70, "stub: NMSTATECTL_STUB_STATE is not set (needed without a NetworkManager)"}
	}
	o := &offlineBackend{state: p, nm: offlineNMState{Profiles: map[string]*profile{}}}
	b, err := os.ReadFile(p + ".nm.json")
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, &exitError{70, "stub: " + err.Error()}
	default:
		if err := json.Unmarshal(b, &o.nm); err != nil {
			return nil, &exitError{70, "stub: " + p + ".nm.json: " + err.Error()}
		}
		if o.nm.Profiles == nil {
			o.nm.Profiles = map[string]*profile{}
		}
	}
	return o, nil
}

func (o *offlineBackend) save() error {
	b, _ := json.Marshal(o.nm)
	if err := os.WriteFile(o.state+".nm.json", b, 0o600); err != nil {
		return &exitError{70, "stub: " + err.Error()}
	}
	return nil
}

// hasEthernet: the interfaces NMSTATECTL_STUB_INTERFACES lists; unset,
// the kernel's own ethernet links in the stand-in's network namespace,
// as the real tool asks NetworkManager for the kernel's devices: a name
// the machine does not have is refused (transcript 12), never assumed; a
// link that is not plain ethernet is declined.
func (o *offlineBackend) hasEthernet(name string) (bool, error) {
	if l, ok := os.LookupEnv("NMSTATECTL_STUB_INTERFACES"); ok {
		return slices.Contains(strings.Split(l, ","), name), nil
	}
	if name == "" || strings.ContainsAny(name, "/") || name == "." || name == ".." {
		return false, nil
	}
	// The kernel answers for the stand-in's own network namespace
	// (netlink); /sys shows the namespace of whoever mounted it, which is
	// another one under a bare setns, so it is read only where the two
	// agree on the link.
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return false, nil
	}
	link := filepath.Join("/sys/class/net", name)
	if idx, err := os.ReadFile(filepath.Join(link, "ifindex")); err != nil || strings.TrimSpace(string(idx)) != strconv.Itoa(iface.Index) {
		return false, declined("apply of ethernet %s where /sys shows another network namespace's links", name)
	}
	b, err := os.ReadFile(filepath.Join(link, "type"))
	if err != nil {
		return false, &exitError{70, "stub: " + err.Error()}
	}
	// The transcripts show an ethernet apply only to a veth (08: eth0 is
	// `type: veth`) and to a name that is missing (12). A link of another
	// kind exists, so 12's refusal would be invented, and so would an
	// accept: ARPHRD_ETHER (1) is also what bridges, bonds and VLANs
	// report, which the kernel marks with a DEVTYPE that veths and NICs
	// lack.
	if t := strings.TrimSpace(string(b)); t != "1" {
		return false, declined("apply of ethernet %s to a link of ARPHRD type %s", name, t)
	}
	uevent, err := os.ReadFile(filepath.Join(link, "uevent"))
	if err != nil {
		return false, &exitError{70, "stub: " + err.Error()}
	}
	for _, l := range strings.Split(string(uevent), "\n") {
		if kind, ok := strings.CutPrefix(l, "DEVTYPE="); ok {
			return false, declined("apply of ethernet %s to a %s link", name, kind)
		}
	}
	// A veth has a peer (iflink is not its own ifindex), a NIC a device;
	// a virtual link with neither (ifb, dummy) is not either.
	idx, _ := os.ReadFile(filepath.Join(link, "ifindex"))
	peer, _ := os.ReadFile(filepath.Join(link, "iflink"))
	if _, err := os.Stat(filepath.Join(link, "device")); err != nil && string(idx) == string(peer) {
		return false, declined("apply of ethernet %s to a virtual link that is no veth", name)
	}
	return true, nil
}

func (o *offlineBackend) profile(iface string) (*profile, error) {
	return o.nm.Profiles[iface], nil
}

func (o *offlineBackend) pending() (*offlineCheckpoint, error) {
	b, err := os.ReadFile(o.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &exitError{70, "stub: " + err.Error()}
	}
	var cp offlineCheckpoint
	if err := json.Unmarshal(b, &cp); err != nil || cp.Path == "" {
		return nil, &exitError{70, fmt.Sprintf("stub: %s is not the stand-in's checkpoint record", o.state)}
	}
	return &cp, nil
}

func (o *offlineBackend) createCheckpoint(uint32) (string, error) {
	cp, err := o.pending()
	if err != nil {
		return "", err
	}
	if cp != nil {
		return "", errCheckpointConflict
	}
	o.nm.Checkpoints++
	cp = &offlineCheckpoint{Path: "/org/freedesktop/NetworkManager/Checkpoint/" + strconv.Itoa(o.nm.Checkpoints), Before: o.nm.Profiles}
	b, _ := json.Marshal(cp)
	if err := o.save(); err != nil {
		return "", err
	}
	if err := os.WriteFile(o.state, b, 0o600); err != nil {
		return "", &exitError{70, "stub: " + err.Error()}
	}
	return cp.Path, nil
}

func (o *offlineBackend) checkpoints() ([]string, error) {
	cp, err := o.pending()
	if cp == nil || err != nil {
		return nil, err
	}
	return []string{cp.Path}, nil
}

func (o *offlineBackend) destroyCheckpoint(string) error {
	if err := os.Remove(o.state); err != nil && !errors.Is(err, os.ErrNotExist) {
		return &exitError{70, "stub: " + err.Error()}
	}
	return nil
}

func (o *offlineBackend) rollbackCheckpoint(string) error {
	cp, err := o.pending()
	if err != nil || cp == nil {
		return err
	}
	o.nm.Profiles = cp.Before
	if o.nm.Profiles == nil {
		o.nm.Profiles = map[string]*profile{}
	}
	if err := o.save(); err != nil {
		return err
	}
	return o.destroyCheckpoint(cp.Path)
}

func (o *offlineBackend) put(p *profile, _ []byte, _, _ bool) error {
	next := map[string]*profile{}
	for k, v := range o.nm.Profiles {
		next[k] = v
	}
	next[p.Iface] = p
	o.nm.Profiles = next
	return o.save()
}
