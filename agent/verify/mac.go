package verify

import (
	"bytes"
	"net"
	"path"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/keyfile"
	"github.com/nodereg/nodereg/internal/nic"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/protocol"
)

// A profile identified by MAC address (nmstate identifier: mac-address, a
// keyfile with [ethernet] mac-address and no interface-name) binds to
// whatever the kernel calls that NIC; the state file records it under the
// profile's name. The findings look for it under the kernel's name.

// deviceNames maps each interface name of the state file to the kernel's
// name of its device: the name itself, unless the applied config (the
// digested copy the manifest lists, or our keyfiles) binds that name by
// MAC and a device has that MAC.
func deviceNames(in Input) map[string]string {
	out := map[string]string{}
	for name := range in.addresses {
		out[name] = name
	}
	byMAC := in.ByMAC
	if byMAC == nil {
		byMAC = kernelByMAC
	}
	for name, mac := range macBound(in.Files) {
		if _, ok := out[name]; !ok {
			continue
		}
		if dev, err := byMAC(mac); err == nil && dev != "" {
			out[name] = dev
		}
	}
	return out
}

// macBound lists the interface names the applied config binds by MAC, with
// the MAC: nmstate interfaces with identifier mac-address, keyfiles with
// [ethernet] mac-address and no interface-name (by id and by file name).
func macBound(files host.FS) map[string]string {
	out := map[string]string{}
	m, err := readManifest(files)
	if err != nil || m == nil {
		return out
	}
	keyfile := func(name string, b []byte) {
		if id, iface, mac := keyfileIdentity(name, b); iface == "" && mac != "" {
			out[strings.TrimSuffix(name, ".nmconnection")] = mac
			if id != "" {
				out[id] = mac
			}
		}
	}
	for _, f := range m.Files {
		b, err := files.ReadFile(f.Path, maxFile)
		if err != nil {
			continue // a keyfile yip writes at boot may not be there yet
		}
		switch f.Kind {
		case state.KindKeyfile:
			keyfile(path.Base(f.Path), b)
		case state.KindDigested:
			// Held to the YAML budget of every local YAML: the file is on
			// disk between runs, and an alias bomb there must not stall
			// the check.
			var doc map[string]any
			n, err := protocol.ParseYAML(b)
			if err != nil || n.Decode(&doc) != nil {
				continue
			}
			ifaces, isState := doc["interfaces"].([]any)
			for _, it := range ifaces {
				i, _ := it.(map[string]any)
				name, _ := i["name"].(string)
				mac, _ := i["mac-address"].(string)
				if i["identifier"] == "mac-address" && name != "" && mac != "" {
					out[name] = mac
				}
			}
			for name, v := range doc {
				if text, ok := v.(string); ok && !isState {
					keyfile(name, []byte(text))
				}
			}
		}
	}
	return out
}

// keyfileIdentity reads the id, interface name and MAC address of a
// keyfile apply wrote (so already checked), as NetworkManager reads them.
func keyfileIdentity(name string, b []byte) (id, iface, mac string) {
	f, err := keyfile.Parse(b)
	if err != nil {
		return "", "", ""
	}
	p := keyfile.ReadProfile(f, name)
	return p.ID, p.InterfaceName, p.MAC
}

// kernelByMAC is the kernel's name of the interface with hardware address
// mac ("" when none has it).
func kernelByMAC(mac string) (string, error) {
	want, err := net.ParseMAC(mac)
	if err != nil {
		return "", err
	}
	ifs, err := nic.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		if bytes.Equal(i.HardwareAddr, want) {
			return i.Name, nil
		}
	}
	return "", nil
}
