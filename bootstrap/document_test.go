package bootstrap

import (
	"os"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/errclass"
)

// dropIn is a drop-in carrying a one-address static bootstrap network.
const dropIn = `elemental:
  registration:
    bootstrap-network:
      configurator: nmconnections
      config:
        eth0: |
          [connection]
          id=eth0
          type=ethernet
          interface-name=eth0
          [ipv4]
          method=manual
          address1={ip}/24
      ipAddresses:
        ip:
          static:
          - mac: 52:54:00:00:00:01
            address: 10.0.0.5
`

// cloudConfig is a yip cloud-config writing content at path.
func cloudConfig(path, content, extra string) string {
	var b strings.Builder
	b.WriteString("stages:\n  initramfs:\n  - name: boot\n    files:\n    - path: " + path + "\n" + extra + "      content: |\n")
	for _, l := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
		b.WriteString("        " + l + "\n")
	}
	return b.String()
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+by) + "\n"
}

// FromDocument finds the bootstrap network in each file an operator
// holds, says where, and refuses what the node would not read, naming it.
func TestFromDocument(t *testing.T) {
	cc := cloudConfig("/run/nodereg/config.d/50-bootstrap.yaml", dropIn, "")
	for _, c := range []struct {
		name, doc, where, err string
	}{
		{"drop-in", dropIn, "config file or drop-in", ""},
		{"cloud-config", cc, `cloud-config, stage initramfs "boot", file /run/nodereg/config.d/50-bootstrap.yaml`, ""},
		{"seed image", "kind: SeedImage\nmetadata:\n  name: iso\nspec:\n  cloud-config:\n" + indent(cc, "    "), "SeedImage iso spec.cloud-config, stage initramfs", ""},
		{"machine registration", "kind: MachineRegistration\nmetadata:\n  name: fleet\nspec:\n  config:\n    cloud-config:\n" + indent(cc, "      "), "MachineRegistration fleet spec.config.cloud-config", ""},
		{"oem config.d", cloudConfig("/oem/registration/config.d/50-b.yaml", dropIn, ""), "file /oem/registration/config.d/50-b.yaml", ""},
		{"a path the agent does not read", cloudConfig("/etc/nodereg/50-b.yaml", dropIn, ""), "", "file /etc/nodereg/50-b.yaml: the agent reads no drop-in there"},
		{"not .yaml", cloudConfig("/run/nodereg/config.d/50-b.yml", dropIn, ""), "", "the agent reads no drop-in there"},
		{"encoded", cloudConfig("/run/nodereg/config.d/50-b.yaml", dropIn, "      encoding: b64\n"), "", "encoding b64"},
		{"two", cc + strings.TrimPrefix(cloudConfig("/run/nodereg/config.d/60-b.yaml", dropIn, ""), "stages:\n  initramfs:\n"), "", "2 files carry"},
		{"seed image without cloud-config", "kind: SeedImage\nspec:\n  type: iso\n", "", "no elemental.registration.bootstrap-network in it"},
		{"cloud-config without the drop-in", cloudConfig("/run/nodereg/config.d/50-b.yaml", "elemental: {}\n", ""), "", "no file of its stages is a drop-in"},
		{"other kind", "kind: Secret\n", "", "kind Secret: want"},
		{"bad block", strings.Replace(dropIn, "address: 10.0.0.5", "address: nope", 1), "", "static[0].address"},
	} {
		conf, where, err := FromDocument([]byte(c.doc))
		switch {
		case c.err == "" && (err != nil || conf == nil || !strings.Contains(where, c.where)):
			t.Errorf("%s: %v, where %q, want %q", c.name, err, where, c.where)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		case c.err != "" && !errclass.Is(err, errclass.Config):
			t.Errorf("%s: %v is not a configuration error (78)", c.name, err)
		}
	}
}

// The example SeedImage and MachineRegistration carry the same bootstrap
// network as the cloud-config of docs/rancher.md section 4.
func TestRancherExamplesCarryTheBootstrap(t *testing.T) {
	var want *Config
	for _, f := range []string{"cloud-config.yaml", "seedimage.yaml", "machineregistration.yaml"} {
		b, err := os.ReadFile("../examples/rancher/" + f)
		if err != nil {
			t.Fatal(err)
		}
		conf, where, err := FromDocument(b)
		if err != nil || !strings.Contains(where, "/run/nodereg/config.d/50-bootstrap.yaml") {
			t.Fatalf("%s: %v (%q)", f, err, where)
		}
		if want == nil {
			want = conf
		} else if conf.Configurator != want.Configurator || conf.IPAddresses["boot-ip"].Range == nil ||
			conf.IPAddresses["boot-ip"].Range.Start != want.IPAddresses["boot-ip"].Range.Start {
			t.Errorf("%s carries another bootstrap network: %+v", f, conf)
		}
	}
}

// A range with no fact to start from can never be previewed nor used:
// a configuration error (78), not "try again later".
func TestNoIdentityIsAConfigurationError(t *testing.T) {
	conf, _, err := FromDocument([]byte(strings.Replace(dropIn, "static:\n          - mac: 52:54:00:00:00:01\n            address: 10.0.0.5", "range:\n            start: 10.0.0.10\n            end: 10.0.0.20\n            prefix: 24", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Preview(conf, Facts{})
	if err == nil || !errclass.Is(err, errclass.Config) || !strings.Contains(err.Error(), "no system UUID, permanent MAC or serial") {
		t.Fatalf("Preview with no facts: %v, want a configuration error", err)
	}
	f, err := FactsOf([]string{"52:54:00:AA:00:01", "52:54:00:aa:00:01"}, " Not Specified ", "4C4C4544-0042-3610-8052-B4C04F385631")
	if err != nil || len(f.MACs) != 1 || f.MACs[0] != "52:54:00:aa:00:01" || f.Serial != "" || f.UUID != "4c4c4544-0042-3610-8052-b4c04f385631" {
		t.Errorf("FactsOf: %+v, %v", f, err)
	}
}
