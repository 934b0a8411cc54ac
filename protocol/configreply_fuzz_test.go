package protocol

import (
	"maps"
	"strings"
	"testing"
)

// FuzzDecodeConfigReply feeds arbitrary MsgConfig payloads (seeded with the
// captured upstream reply, raw: byte lists included). A reply we accept must
// survive our own encoding: what we would hand to an upstream client decodes
// to the same network config.
func FuzzDecodeConfigReply(f *testing.F) {
	// testdata/fuzz holds the captured upstream payloads (tests/vectors).
	f.Add([]byte("elemental: {registration: {url: http://x/}}\nconfigurator: nmstate\nipAddresses: {a: 10.0.0.1}\nconfig: {interfaces: {raw: [91, 93], object: null}}\nexplicitNetworkConfig: true\n"))
	f.Add([]byte("config: {x: {raw: [300], object: null}}\n"))
	f.Add([]byte("config: {x: {raw: null}}\n"))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nconfig: {x: *c}\n"))
	f.Fuzz(func(t *testing.T, p []byte) {
		var cfg Config
		r, err := DecodeConfigReply(p, &cfg)
		if err != nil {
			if r != nil {
				t.Fatalf("error %v with a non-nil reply", err)
			}
			if !strings.Contains(err.Error(), "decoding") {
				t.Fatalf("error does not say what was being decoded: %v", err)
			}
			return
		}
		if r.Network == nil {
			return
		}
		enc, err := EncodeConfigReply(&ConfigReply{Config: cfg, Network: r.Network, ExplicitNetworkConfig: r.ExplicitNetworkConfig}, Version)
		if err != nil {
			// Values JSON cannot carry (e.g. maps with non-string keys
			// from plain YAML) cannot be re-encoded; refusing is fine.
			return
		}
		var cfg2 Config
		r2, err := DecodeConfigReply(enc, &cfg2)
		if err != nil {
			t.Fatalf("our own encoding of an accepted reply does not decode: %v\n%s", err, enc)
		}
		if !r.Network.IsReal() {
			return
		}
		if r2.Network == nil || r2.Network.Configurator != r.Network.Configurator || !maps.Equal(r2.Network.IPAddresses, r.Network.IPAddresses) {
			t.Fatalf("network config changed over re-encoding: %+v -> %+v", r.Network, r2.Network)
		}
		if r2.ExplicitNetworkConfig != r.ExplicitNetworkConfig {
			t.Fatalf("announcement changed over re-encoding")
		}
	})
}
