package node

import (
	"strconv"
	"strings"
)

// NmstateTemplate is the network template of the foundation issue (and of
// cmd/regserver/example.yaml), indented to sit under a registration's
// `network:` key in a regserver config. Its address comes from pool-a.
const NmstateTemplate = templateHead + `        description: Main-NIC
        state: up
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
        ipv6: {enabled: false}
      routes:
        config:
        - {destination: 0.0.0.0/0, next-hop-interface: ` + NIC + `, next-hop-address: 192.168.122.1, metric: 150, table-id: 254}
      dns-resolver:
        config: {server: [192.168.122.1], search: []}
`

// templateHead is what the templates share: nmstate, the pool address, and
// the first interface up to its type.
const templateHead = `
    configurator: nmstate
    ipAddresses:
      inventory-ip: pool-a
    config:
      interfaces:
      - name: ` + NIC + `
        type: ethernet
`

// NmstateConfig returns the nmstate state under NmstateTemplate's config:
// key, un-indented, placeholder kept: what the agent's generator reads.
func NmstateConfig() string {
	_, state, _ := strings.Cut(NmstateTemplate, "\n    config:\n")
	return strings.TrimPrefix(strings.ReplaceAll("\n"+state, "\n      ", "\n"), "\n")
}

// AddressOnlyTemplate is a smaller nmstate template: one interface with the
// pool address at the given prefix length, nothing else.
func AddressOnlyTemplate(prefix int) string {
	return templateHead + `        state: up
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: ` + strconv.Itoa(prefix) + `}]}
`
}

// ServerConfig is a regserver config with one registration (token
// "<Name>-token", auth mac) and one pool, pool-a.
type ServerConfig struct {
	Name string
	// MachineName is the name template; "" uses m-${System Information/UUID},
	// "-" leaves it out (regserver then names machines m-<random UUID>).
	MachineName string
	// Elemental is more YAML under config.elemental, indented by 6.
	Elemental string
	// Network is the template under network:, as NmstateTemplate.
	Network string
	// Pool is the addresses entry of pool-a; Prefix and Gateway its others.
	Pool    string
	Prefix  int
	Gateway string
}

// YAML renders the config file.
func (c ServerConfig) YAML() string {
	name := "  machineName: m-${System Information/UUID}\n"
	switch c.MachineName {
	case "":
	case "-":
		name = ""
	default:
		name = "  machineName: " + c.MachineName + "\n"
	}
	return "registrations:\n- name: " + c.Name + "\n  token: " + c.Name + "-token\n" + name +
		"  config:\n    elemental:\n      registration:\n        auth: mac\n" + c.Elemental +
		"  network:" + c.Network +
		"pools:\n- name: pool-a\n  addresses: [" + c.Pool + "]\n  prefix: " + strconv.Itoa(c.Prefix) + "\n  gateway: " + c.Gateway + "\n"
}
