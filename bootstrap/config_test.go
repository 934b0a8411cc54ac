package bootstrap

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
)

// staticFile is docs/bootstrap.md's static example.
const staticFile = `elemental:
  registration:
    url: https://regserver.example:9443/elemental/registration/abc
    auth: mac
    bootstrap-network:
      configurator: nmconnections
      config:
        bootstrap-eth0: |
          [connection]
          id=bootstrap-eth0
          type=ethernet
          interface-name=eth0
          autoconnect=false
          [ipv4]
          method=manual
          address1={boot-ip}/24,10.231.0.1
          dns=10.231.0.1;
          dad-timeout=3000
          [ipv6]
          method=disabled
      ipAddresses:
        boot-ip:
          static:
          - mac: 52:54:00:31:00:02
            address: 10.231.0.21
          - serial: CZ2041XJ7R
            address: 10.231.0.22
          - uuid: 4C4C4544-0042-3610-8052-B4C04F385631
            address: 10.231.0.23
`

// rangeFile is docs/bootstrap.md's range example.
const rangeFile = `elemental:
  registration:
    url: https://regserver.example:9443/elemental/registration/abc
    bootstrap-network:
      configurator: nmstate
      config:
        interfaces:
        - name: eth0
          type: ethernet
          state: up
          ipv4:
            enabled: true
            dhcp: false
            address:
            - ip: "{boot-ip}"
              prefix-length: 24
          ipv6:
            enabled: false
        routes:
          config:
          - destination: 0.0.0.0/0
            next-hop-address: 10.231.0.1
            next-hop-interface: eth0
      ipAddresses:
        boot-ip:
          range:
            start: 10.231.0.100
            end: 10.231.0.149
            prefix: 24
            gateway: 10.231.0.1
`

func mustConfig(t *testing.T, file string) *Config {
	t.Helper()
	c, err := FromConfigFile([]byte(file))
	if err != nil {
		t.Fatalf("FromConfigFile: %v", err)
	}
	if c == nil {
		t.Fatal("FromConfigFile found no bootstrap-network")
	}
	return c
}

func TestFromConfigFileExamples(t *testing.T) {
	c := mustConfig(t, staticFile)
	if c.Configurator != "nmconnections" || len(c.IPAddresses["boot-ip"].Static) != 3 {
		t.Fatalf("static example decoded as %+v", c)
	}
	c = mustConfig(t, rangeFile)
	r := c.IPAddresses["boot-ip"].Range
	if c.Configurator != "nmstate" || r == nil || r.Start != "10.231.0.100" || r.Prefix != 24 {
		t.Fatalf("range example decoded as %+v", c)
	}
	phs, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	if phs[0].iface != "eth0" {
		t.Errorf("probe interface derived from the template: %q, want eth0", phs[0].iface)
	}
}

func TestFromConfigFileAbsent(t *testing.T) {
	for _, f := range []string{
		"elemental:\n  registration:\n    url: https://x\n",
		"elemental:\n  registration:\n    bootstrap-network:\n",
		"",
	} {
		c, err := FromConfigFile([]byte(f))
		if c != nil || err != nil {
			t.Errorf("%q: got %+v, %v; want nil, nil", f, c, err)
		}
	}
}

// replace swaps one line of an example, failing when it is not there so a
// changed example cannot turn a case into a no-op.
func replace(t *testing.T, file, old, new string) string {
	t.Helper()
	if !strings.Contains(file, old) {
		t.Fatalf("example has no %q", old)
	}
	return strings.Replace(file, old, new, 1)
}

func TestFromConfigFileErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, file, path string
	}{
		{"misspelt key", replace(t, rangeFile, "      ipAddresses:", "      ipaddresses:"), Key + ".ipaddresses: unknown key (line 24)"},
		{"misspelt range key", replace(t, rangeFile, "gateway: 10.231.0.1", "gw: 10.231.0.1"), Key + ".ipAddresses.boot-ip.range.gw: unknown key (line 30)"},
		{"misspelt static key", replace(t, staticFile, "- serial: CZ2041XJ7R", "- serial-number: CZ2041XJ7R"), Key + ".ipAddresses.boot-ip.static[1].serial-number: unknown key"},
		{"wrong type", replace(t, rangeFile, "prefix: 24", "prefix: [24]"), "line 29"},
		{"unknown configurator", replace(t, rangeFile, "configurator: nmstate", "configurator: nmc"), Key + ".configurator:"},
		{"no configurator", replace(t, rangeFile, "      configurator: nmstate\n", ""), Key + ".configurator: missing"},
		{"no source", replace(t, rangeFile, "        boot-ip:\n", "        boot-ip: {}\n        other:\n"), Key + ".ipAddresses.boot-ip: neither static nor range"},
		{"bad start", replace(t, rangeFile, "start: 10.231.0.100", "start: 10.231.0"), Key + ".ipAddresses.boot-ip.range.start:"},
		{"IPv6 range", replace(t, rangeFile, "start: 10.231.0.100", "start: fd00::1"), Key + ".ipAddresses.boot-ip.range.start: \"fd00::1\" is not an IPv4 address"},
		{"end before start", replace(t, rangeFile, "end: 10.231.0.149", "end: 10.231.0.99"), Key + ".ipAddresses.boot-ip.range.end: 10.231.0.99 comes before start"},
		{"end outside subnet", replace(t, rangeFile, "end: 10.231.0.149", "end: 10.231.1.1"), Key + ".ipAddresses.boot-ip.range.end: 10.231.1.1 is outside 10.231.0.0/24"},
		{"no prefix", replace(t, rangeFile, "            prefix: 24\n", ""), Key + ".ipAddresses.boot-ip.range.prefix: missing"},
		{"gateway outside", replace(t, rangeFile, "gateway: 10.231.0.1", "gateway: 10.9.0.1"), Key + ".ipAddresses.boot-ip.range.gateway:"},
		{"too large", replace(t, replace(t, rangeFile, "prefix: 24", "prefix: 8"), "end: 10.231.0.149", "end: 10.240.0.0"), "more than the 65536 allowed"},
		{"only gateway left", replace(t, replace(t, rangeFile, "start: 10.231.0.100", "start: 10.231.0.1"), "end: 10.231.0.149", "end: 10.231.0.1"), "no usable address"},
		{"placeholder without source", replace(t, rangeFile, `- ip: "{boot-ip}"`, `- ip: "{boot-ipx}"`), Key + ".config.interfaces[0].ipv4.address[0].ip: placeholder {boot-ipx} has no source"},
		{"unused placeholder", replace(t, rangeFile, "      ipAddresses:\n", "      ipAddresses:\n        spare:\n          static:\n          - uuid: 1\n            address: 10.0.0.1\n"), Key + ".ipAddresses.spare: placeholder {spare} is not used"},
		{"template hostile to the renderer", replace(t, rangeFile, "- name: eth0", "- name: ../eth0"), Key + ".config.interfaces[0].name:"},
		{"bad interface", replace(t, rangeFile, "            gateway: 10.231.0.1\n", "            gateway: 10.231.0.1\n          interface: a/b\n"), Key + ".ipAddresses.boot-ip.interface:"},
		{"bad MAC", replace(t, staticFile, "mac: 52:54:00:31:00:02", "mac: 52:54:00:31:00"), Key + ".ipAddresses.boot-ip.static[0].mac:"},
		{"two identifiers", replace(t, staticFile, "- serial: CZ2041XJ7R", "- serial: CZ2041XJ7R\n            uuid: x"), Key + ".ipAddresses.boot-ip.static[1]: needs exactly one of mac, serial, uuid (has 2)"},
		{"no address", replace(t, staticFile, "            address: 10.231.0.22\n", ""), Key + ".ipAddresses.boot-ip.static[1].address: missing"},
		{"address with prefix", replace(t, staticFile, "address: 10.231.0.22", "address: 10.231.0.22/24"), Key + ".ipAddresses.boot-ip.static[1].address: \"10.231.0.22/24\" is not a unicast IP address"},
		{"duplicate entry", replace(t, staticFile, "- serial: CZ2041XJ7R", "- mac: 52-54-00-31-00-02"), Key + ".ipAddresses.boot-ip.static[1]: same mac as static[0]"},
		{"mixed families", replace(t, staticFile, "address: 10.231.0.22", "address: fd00::22"), Key + ".ipAddresses.boot-ip.static[1].address: mixes IPv4 and IPv6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromConfigFile([]byte(tc.file))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *ConfigError", err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not contain %q", err, tc.path)
			}
		})
	}
}

func TestValidateNeedsProbeInterfaceWhenTemplateIsAmbiguous(t *testing.T) {
	c := mustConfig(t, staticFile)
	c.Config["bootstrap-eth1"] = c.Config["bootstrap-eth0"]
	kf := strings.NewReplacer("bootstrap-eth0", "bootstrap-eth1", "interface-name=eth0", "interface-name=eth1").Replace(c.Config["bootstrap-eth0"].Value.(string))
	c.Config["bootstrap-eth1"] = rawString(kf)
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), Key+".ipAddresses.boot-ip.interface: cannot tell which interface") {
		t.Fatalf("placeholder on eth0 and eth1 without interface: %v", err)
	}
	src := c.IPAddresses["boot-ip"]
	src.Interface = "eth1"
	c.IPAddresses["boot-ip"] = src
	phs, err := c.validate()
	if err != nil || phs[0].iface != "eth1" {
		t.Fatalf("with interface eth1: %v", err)
	}
	src.Interface, src.NoProbe = "", true
	c.IPAddresses["boot-ip"] = src
	if phs, err = c.validate(); err != nil || phs[0].iface != "" {
		t.Fatalf("with no-probe: %v, iface %q", err, phs[0].iface)
	}
}

func TestValidateUsesTheRenderer(t *testing.T) {
	// A keyfile the apply package refuses must be refused here too, with
	// its error underneath.
	c := mustConfig(t, staticFile)
	c.Config["bootstrap-eth0"] = rawString("[connection\nid=x\naddress1={boot-ip}/24\n")
	err := c.Validate()
	var fe *apply.FieldError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), Key+".config.bootstrap-eth0:") {
		t.Fatalf("malformed keyfile: %v", err)
	}
}

func TestCheckServerReply(t *testing.T) {
	sent := "elemental:\n  registration:\n    url: https://x\n    bootstrap-network:\n      configurator: nmstate\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(sent), &doc); err != nil {
		t.Fatal(err)
	}
	if err := CheckServerReply(&doc); !errors.Is(err, ErrServerSent) {
		t.Errorf("reply with bootstrap-network: %v, want ErrServerSent", err)
	}
	for _, ok := range []string{"elemental:\n  registration:\n    url: https://x\n", "configurator: nmstate\nipAddresses: {a: 10.0.0.1}\n"} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(ok), &doc); err != nil {
			t.Fatal(err)
		}
		if err := CheckServerReply(&doc); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if err := CheckServerReply(nil); err != nil {
		t.Errorf("no document (the decoder refused the reply): %v", err)
	}
}

// With many placeholders, an unused one is still found: the stand-in of
// the first (240.0.0.1 before the fix) is not mistaken for a piece of the
// eleventh's (240.0.0.11).
func TestUnusedPlaceholderAmongMany(t *testing.T) {
	var kf strings.Builder
	kf.WriteString("[connection]\nid=boot\ntype=ethernet\ninterface-name=eth0\n[ipv4]\nmethod=manual\n")
	c := &Config{Configurator: "nmconnections", IPAddresses: map[string]Source{}}
	for i := range 12 {
		name := fmt.Sprintf("ip%02d", i)
		c.IPAddresses[name] = Source{Static: []StaticEntry{{UUID: "a", Address: fmt.Sprintf("10.0.0.%d", i+1)}}}
		if i != 0 {
			fmt.Fprintf(&kf, "address%d={%s}/24\n", i+1, name)
		}
	}
	c.Config = map[string]protocol.RawValue{"boot": rawString(kf.String())}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), Key+".ipAddresses.ip00: placeholder {ip00} is not used") {
		t.Fatalf("ip00 unused among 12: %v", err)
	}
}
