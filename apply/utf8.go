package apply

import (
	"maps"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// checkUTF8 refuses, before anything else is made of the server's network
// config, a key or value that is not valid UTF-8 (a YAML !!binary value):
// NetworkManager would drop it and the profile would not be what the
// policy checked (docs/reliability.md, "Network-config policy"). A keyfile
// is named by section and key, as the policy names it later.
func checkUTF8(conf string, nc *protocol.NetworkConfig) error {
	for _, k := range slices.Sorted(maps.Keys(nc.Config)) {
		v := nc.Config[k].Value
		if text, ok := v.(string); ok && conf == protocol.ConfiguratorNmconnections {
			name := k
			if !strings.HasSuffix(name, keyfileSuffix) {
				name += keyfileSuffix
			}
			if err := netpolicy.CheckUTF8Keyfile("config."+name, []byte(text)); err != nil {
				return err
			}
			continue
		}
		if err := netpolicy.CheckUTF8Value("config", map[string]any{k: v}); err != nil {
			return err
		}
	}
	addrs := map[string]any{}
	for k, v := range nc.IPAddresses {
		addrs[k] = v
	}
	return netpolicy.CheckUTF8Value("ipAddresses", addrs)
}
