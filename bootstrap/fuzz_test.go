package bootstrap

import (
	"errors"
	"testing"

	"github.com/nodereg/nodereg/apply"
)

// FuzzFromConfigFile feeds arbitrary config files through validation and a
// preview. A config that validates must yield, for any machine, either a
// typed refusal or a network config that apply.Render accepts: validation
// renders with stand-in addresses, and the real ones must not break what
// the stand-ins passed.
func FuzzFromConfigFile(f *testing.F) {
	f.Add([]byte(staticFile))
	f.Add([]byte(rangeFile))
	f.Add([]byte("elemental:\n  registration:\n    bootstrap-network:\n      configurator: nmstate\n      config: {interfaces: [{name: eth0, ipv6: {address: [{ip: '{v6}', prefix-length: 64}]}}]}\n      ipAddresses: {v6: {static: [{uuid: a, address: 'fd00::5'}]}}\n"))
	facts := []Facts{
		{MACs: []string{"52:54:00:31:00:02"}, Serial: "CZ2041XJ7R", UUID: "a"},
		{UUID: "4c4c4544-0042-3610-8052-b4c04f385631"},
		{Serial: "x"},
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := FromConfigFile(in)
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("untyped error %T: %v", err, err)
		}
		if c == nil {
			return
		}
		for _, fa := range facts {
			p, err := Preview(c, fa)
			if err != nil {
				var nm *NoMatchError
				var ae *AmbiguousError
				if !errors.As(err, &nm) && !errors.As(err, &ae) && !errors.As(err, &ce) {
					t.Fatalf("preview for %s: %T %v", fa, err, err)
				}
				continue
			}
			if _, err := apply.Render(p.Network); err != nil {
				t.Fatalf("validated config does not render with %v: %v", p.Network.IPAddresses, err)
			}
		}
	})
}
