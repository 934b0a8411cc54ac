package regconfig

import (
	"os"
	"strings"
	"testing"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load("../../cmd/regserver/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, ok := c.ByToken("demo-token")
	if !ok {
		t.Fatal("token demo-token not found")
	}
	if r.Network.IPAddresses["inventory-ip"] != "pool-a" || c.Pools["pool-a"].Total() != 51 {
		t.Fatalf("network/pool not as written: %+v", r.Network.IPAddresses)
	}
	users, ok := r.Config.CloudConfig["users"].Value.([]any)
	if !ok || len(users) != 1 {
		t.Fatalf("cloud-config users = %#v", r.Config.CloudConfig["users"].Value)
	}
	if got := Placeholders(r.Network.Config); len(got) != 1 || got[0] != "inventory-ip" {
		t.Fatalf("placeholders = %v", got)
	}
}

const base = `
pools:
- {name: p, addresses: [10.0.0.10-10.0.0.20], prefix: 24}
registrations:
- name: r
  token: tok
  network:
    configurator: nmstate
    ipAddresses: {ip: p}
    config:
      interfaces: [{name: eth0, ipv4: {address: [{ip: "{ip}", prefix-length: 24}]}}]
`

func TestValidationErrorsNameTheKey(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"unknown pool":     {"{ip: p}", "{ip: q}", `registrations[0].network.ipAddresses.ip: pool "q" is not declared`},
		"bad configurator": {"configurator: nmstate", "configurator: netplan", `registrations[0].network.configurator: "netplan"`},
		"bad pool address": {"10.0.0.10-10.0.0.20", "10.0.0.10-banana", `pools[0]: addresses[0]: range "10.0.0.10-banana"`},
		"unknown key":      {"token: tok", "token: tok\n  tokn: x", "field tokn not found"},
		"empty token":      {"token: tok", "token: ''", "registrations[0].token: empty"},
		"token with slash": {"token: tok", "token: a/b", "registrations[0].token: only letters"},
		"bad prefix":       {"prefix: 24", "prefix: 40", "pools[0]: prefix: 40 out of range"},
		"auth typo":        {"token: tok", "token: tok\n  config: {elemental: {registration: {auth: tmp}}}", `registrations[0].config.elemental.registration.auth: "tmp" is not tpm, mac or sys-uuid`},
		"ftp url":          {"token: tok", "token: tok\n  config: {elemental: {registration: {url: 'ftp://x/y'}}}", `registrations[0].config.elemental.registration.url: "ftp://x/y": scheme must be http or https`},
		"agent url":        {"token: tok", "token: tok\n  config: {elemental: {system-agent: {url: 'x'}}}", `registrations[0].config.elemental.system-agent.url: "x": scheme must be http or https`},
		"network mode":     {"token: tok", "token: tok\n  config: {elemental: {registration: {network-config: always}}}", `registration.network-config: "always"`},
		"machine name":     {"token: tok", "token: tok\n  machineName: m-${Random/Hex/40}", `registrations[0].machineName: template variable ${Random/Hex/40}`},
		"empty name":       {"token: tok", "token: tok\n  machineName: '---'", `registrations[0].machineName: "---" renders to an empty name`},
		"label template":   {"token: tok", "token: tok\n  machineInventoryLabels: {a: '${Random/Nope}'}", `registrations[0].machineInventoryLabels.a: template variable ${Random/Nope}`},
		"gateway outside":  {"prefix: 24}", "prefix: 24, gateway: 10.0.1.1}", `pools[0]: gateway: "10.0.1.1" is outside subnet 10.0.0.0/24`},
		// Both overlaps: the same range twice, and a range inside
		// another.
		"same range twice": {"prefix: 24}", "prefix: 24}\n- {name: q, addresses: [10.0.0.10-10.0.0.11], prefix: 24}", `pools[1]: pool "q" overlaps pool "p" (pools[0]): both could hand out 10.0.0.10`},
		"nested range":     {"prefix: 24}", "prefix: 24}\n- {name: a, addresses: [10.0.0.1-10.0.0.3]}\n- {name: q, addresses: [10.0.0.15-10.0.0.60], prefix: 24}", `pools[2]: pool "q" overlaps pool "p" (pools[0]): both could hand out 10.0.0.15`},
		"gateway in other": {"prefix: 24}", "prefix: 24}\n- {name: q, addresses: [10.0.0.100], prefix: 24, gateway: 10.0.0.12}", `pools[1]: pool "q" overlaps pool "p" (pools[0]): both could hand out 10.0.0.12`},
		"empty config":     {"config:\n      interfaces: [{name: eth0, ipv4: {address: [{ip: \"{ip}\", prefix-length: 24}]}}]", "config: {}", "registrations[0].network.config: empty"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(base, c.from, c.to, 1)
			if doc == base {
				t.Fatalf("test bug: %q not in base", c.from)
			}
			_, err := Parse([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	dup := base + "- name: r2\n  token: tok\n"
	if _, err := Parse([]byte(dup)); err == nil || !strings.Contains(err.Error(), "registrations[1].token: used by another") {
		t.Fatalf("duplicate token: err = %v", err)
	}
	if _, err := Parse(nil); err == nil {
		t.Fatal("empty document accepted")
	}
}

func TestValidHandedOutValuesLoad(t *testing.T) {
	doc := strings.Replace(base, "token: tok", `token: tok
  machineName: m-${Random/Hex/8}
  config: {elemental: {registration: {auth: sys-uuid, url: "https://reg.example:8443/elemental/registration/tok"}, system-agent: {url: "https://rancher.example"}}}`, 1)
	doc = strings.Replace(doc, "prefix: 24}", "prefix: 24}\n- {name: q, addresses: [10.0.0.21-10.0.0.30, 10.0.1.0/24], prefix: 16, gateway: 10.0.0.1}", 1)
	if _, err := Parse([]byte(doc)); err != nil {
		t.Fatal(err)
	}
}

func TestExternalURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://reg.example:8443": true, "http://10.0.0.1/": true,
		"ftp://x": false, "reg.example": false, "https://": false, "https://x/path": false, "https://u:p@x": false,
	} {
		if err := CheckExternalURL(u); (err == nil) != ok {
			t.Errorf("CheckExternalURL(%q) = %v", u, err)
		}
	}
}

// A placeholder that no ipAddresses entry provides can never render: every
// agent would refuse the config, so regserver refuses it at start.
func TestUnknownPlaceholderIsRefused(t *testing.T) {
	doc := strings.Replace(base, `"{ip}"`, `"{other-ip}"`, 1)
	_, err := Parse([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "{other-ip}") || !strings.Contains(err.Error(), "network.config") {
		t.Fatalf("Parse = %v, want a refusal naming network.config and {other-ip}", err)
	}
}

func TestLoadMissingFileNamesPath(t *testing.T) {
	_, err := Load(t.TempDir() + "/nope.yaml")
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("err = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
