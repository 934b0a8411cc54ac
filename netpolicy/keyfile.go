package netpolicy

import (
	"github.com/nodereg/nodereg/internal/keyfile"
)

// Keyfile is one profile to judge: Label names it in refusals (the config key
// it came from, or the generator's output), Name is its file name.
type Keyfile struct {
	Label   string
	Name    string
	Content []byte
}

// read parses a keyfile as NetworkManager does (internal/keyfile, GLib's
// key-file rules: docs/reliability.md) and reads the profile it loads.
func read(kf Keyfile) (*keyfile.File, keyfile.Profile, error) {
	f, err := keyfile.Parse(kf.Content)
	if err != nil {
		return nil, keyfile.Profile{}, err
	}
	return f, keyfile.ReadProfile(f, kf.Name), nil
}

// profile is what the uniqueness and cycle checks need of a keyfile.
type profile struct {
	label           string // names the profile in refusals
	id, uuid, iface string
	vlanParent      string
	isVLAN          bool
}

func effective(p keyfile.Profile) profile {
	return profile{id: p.ID, uuid: p.UUID, iface: p.InterfaceName, isVLAN: p.Type == "vlan", vlanParent: p.VLANParent}
}
