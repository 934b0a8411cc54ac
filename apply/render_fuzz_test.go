package apply

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// FuzzRender decodes arbitrary network-config YAML (the server's MsgConfig
// tail, raw: byte lists included) and renders it. Whatever the server
// sends, Render either refuses with a typed error or produces output that
// carries no template delimiter, no unresolved placeholder of a known name
// and only keyfile names that stay in their directory.
func FuzzRender(f *testing.F) {
	// testdata/fuzz holds the captured upstream payloads (tests/vectors).
	f.Add([]byte("configurator: nmstate\nipAddresses: {ip: 10.0.0.5}\nconfig:\n  interfaces:\n  - {name: eth0, type: ethernet, state: up, ipv4: {enabled: true, address: [{ip: '{ip}', prefix-length: 24}]}}\n"))
	f.Add([]byte("configurator: nmconnections\nipAddresses: {ip: 10.0.0.5}\nconfig:\n  eth0: \"[connection]\\nid=eth0\\ntype=ethernet\\n[ipv4]\\naddress1={ip}/24\\nmethod=manual\\n\"\n"))
	f.Add([]byte("configurator: nmc\nipAddresses: {ip: 'fd00::5'}\nconfig:\n  interfaces: [{name: eth0, type: ethernet, ipv6: {enabled: true, address: [{ip: '{ip}', prefix-length: 64}]}}]\n"))
	f.Add([]byte("configurator: nmstate\nipAddresses: {ip: 10.0.0.5}\nconfig:\n  interfaces: [{name: '{{ .Values }}', type: ethernet}]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var nc protocol.NetworkConfig
		if err := yaml.Unmarshal(in, &nc); err != nil {
			return
		}
		r, err := Render(&nc)
		if err != nil {
			var ue *UnresolvedError
			var fe *FieldError
			if !errors.As(err, &ue) && !errors.As(err, &fe) && !strings.Contains(err.Error(), "render network config") {
				t.Fatalf("untyped render error: %v", err)
			}
			return
		}
		if !nc.IsReal() {
			if r.Configurator != protocol.ConfiguratorNone || len(r.Keyfiles) != 0 || r.Digested != nil {
				t.Fatalf("configurator %q rendered to something: %+v", nc.Configurator, r)
			}
			return
		}
		if strings.Contains(string(r.Digested), "{{") {
			t.Fatalf("template delimiter reached the digested config:\n%s", r.Digested)
		}
		var back any
		if err := yaml.Unmarshal(r.Digested, &back); err != nil {
			t.Fatalf("digested config is not YAML: %v\n%s", err, r.Digested)
		}
		for name := range nc.IPAddresses {
			if strings.Contains(string(r.Digested), "{"+name+"}") {
				t.Fatalf("placeholder {%s} left in the digested config:\n%s", name, r.Digested)
			}
		}
		if r.Configurator == protocol.ConfiguratorNmstate {
			// The whole plan through the built-in translator: refused
			// with the key named, or keyfiles that pass the same gate.
			a := &Applier{Files: host.Root(t.TempDir()), Nmstate: NmstateBuiltin}
			p, err := a.Plan(t.Context(), r)
			// The network policy runs first and names its key path too.
			var fe *FieldError
			var pr *netpolicy.Refusal
			switch {
			case err != nil && errors.As(err, &pr):
				if pr.Path == "" {
					t.Fatalf("policy refusal without a key path: %v", err)
				}
			case err != nil && !errors.As(err, &fe):
				t.Fatalf("built-in refusal without a field: %v", err)
			case err == nil:
				for _, kf := range p.Keyfiles {
					if checkFileName("fuzz", kf.Name) != nil || ParseKeyfile(kf.Name, kf.Content) != nil {
						t.Fatalf("built-in keyfile %q escapes or does not parse", kf.Name)
					}
				}
			}
		}
		for _, kf := range r.Keyfiles {
			if checkFileName("fuzz", kf.Name) != nil || !strings.HasSuffix(kf.Name, keyfileSuffix) {
				t.Fatalf("keyfile name %q escapes or is not a keyfile", kf.Name)
			}
			if strings.Contains(string(kf.Content), "{{") {
				t.Fatalf("template delimiter in keyfile %s", kf.Name)
			}
			if err := ParseKeyfile(kf.Name, kf.Content); err != nil {
				t.Fatalf("rendered keyfile %s does not parse: %v", kf.Name, err)
			}
		}
	})
}
