//go:build vmlab

package vm

import (
	"fmt"
	"strings"
)

// Registrations of the lab: one per machine, so a template change in one
// case touches no other machine.
const (
	regA    = "vmlab-a"    // B1-B3: one NIC, IPv4
	regDS   = "vmlab-ds"   // B6, B5: one NIC, IPv4 + IPv6, then changed and cut off
	regBond = "vmlab-bond" // B4: bond of two NICs, VLAN 42 on it
	regDHCP = "vmlab-dhcp" // B7: one NIC on a segment with DHCP, no bootstrap block
	regCut  = "vmlab-cut"  // B8: one NIC, IPv4, power cuts (one machine per cut point)
)

// templates picks the variant of regDS's template regserver serves.
type templates struct {
	ds  string // "" (dual-stack), "changed" (a second IPv4 address), "cutoff" (NIC moved off the segment)
	cut string // "" or "changed" (a second IPv4 address): B8's live change
}

const poolsYAML = `pools:
- {name: pool-a, addresses: [10.231.0.100-10.231.0.109], prefix: 24, gateway: 10.231.0.1}
- {name: pool-c, addresses: [10.231.0.110-10.231.0.119], prefix: 24, gateway: 10.231.0.1}
- {name: pool-d, addresses: [10.231.0.120-10.231.0.129], prefix: 24, gateway: 10.231.0.1}
- {name: pool-m, addresses: [10.231.0.130-10.231.0.139], prefix: 24, gateway: 10.231.0.1}
- {name: pool-v6, addresses: [2001:db8:1::100-2001:db8:1::1ff], prefix: 64, gateway: "2001:db8:1::1"}
- {name: pool-vlan, addresses: [10.42.0.100-10.42.0.109], prefix: 24, gateway: 10.42.0.1}
- {name: pool-cut, addresses: [10.240.0.10-10.240.0.19], prefix: 24, gateway: 10.240.0.1}
- {name: pool-e, addresses: [10.231.0.140-10.231.0.149], prefix: 24, gateway: 10.231.0.1}
- {name: pool-p, addresses: [10.231.0.150-10.231.0.179], prefix: 24, gateway: 10.231.0.1}
- {name: pool-q, addresses: [10.231.0.180-10.231.0.189], prefix: 24, gateway: 10.231.0.1}
`

func registration(name, network string) string {
	return fmt.Sprintf(`- name: %s
  token: %s-token
  machineName: m-${System Information/UUID}
  config:
    elemental:
      registration:
        auth: tpm
  network:
    configurator: nmstate
%s`, name, name, indent(network, "    "))
}

const netA = `ipAddresses:
  inventory-ip: pool-a
` + netOneNIC

// netOneNIC is eth0 with the placeholder inventory-ip and a default route.
const netOneNIC = `config:
  interfaces:
  - name: eth0
    type: ethernet
    state: up
    ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
    ipv6: {enabled: false}
  routes:
    config:
    - {destination: 0.0.0.0/0, next-hop-interface: eth0, next-hop-address: 10.231.0.1, metric: 150, table-id: 254}
`

func netDS(variant string) string {
	ips := `ipAddresses:
  ds-ip: pool-c
  ds-ip6: pool-v6
`
	v4 := `[{ip: "{ds-ip}", prefix-length: 24}]`
	v6 := `{enabled: true, dhcp: false, autoconf: false, address: [{ip: "{ds-ip6}", prefix-length: 64}]}`
	routes := `    - {destination: 0.0.0.0/0, next-hop-interface: eth0, next-hop-address: 10.231.0.1, metric: 150, table-id: 254}
    - {destination: "::/0", next-hop-interface: eth0, next-hop-address: "2001:db8:1::1", metric: 150, table-id: 254}
`
	switch variant {
	case "changed":
		ips += "  extra-ip: pool-d\n"
		v4 = `[{ip: "{ds-ip}", prefix-length: 24}, {ip: "{extra-ip}", prefix-length: 24}]`
	case "cutoff":
		// The NIC moves to a subnet the server is not on: the agent's
		// reachability check must fail and roll it back.
		ips = "ipAddresses:\n  cut-ip: pool-cut\n"
		v4 = `[{ip: "{cut-ip}", prefix-length: 24}]`
		v6 = `{enabled: false}`
		routes = "    - {destination: 0.0.0.0/0, next-hop-interface: eth0, next-hop-address: 10.240.0.1, metric: 150, table-id: 254}\n"
	}
	return ips + `config:
  interfaces:
  - name: eth0
    type: ethernet
    state: up
    ipv4: {enabled: true, dhcp: false, address: ` + v4 + `}
    ipv6: ` + v6 + `
  routes:
    config:
` + routes
}

// netBond: two NICs by name in an active-backup bond carrying the
// management address (the server's segment is untagged), VLAN 42 on the bond
// carrying the pool address of the VLAN.
const netBond = `ipAddresses:
  mgmt-ip: pool-m
  vlan-ip: pool-vlan
config:
  interfaces:
  - name: bond0
    type: bond
    state: up
    link-aggregation:
      mode: active-backup
      options: {miimon: 100}
      port: [eth0, eth1]
    ipv4: {enabled: true, dhcp: false, address: [{ip: "{mgmt-ip}", prefix-length: 24}]}
    ipv6: {enabled: false}
  - name: bond0.42
    type: vlan
    state: up
    vlan: {base-iface: bond0, id: 42}
    ipv4: {enabled: true, dhcp: false, address: [{ip: "{vlan-ip}", prefix-length: 24}]}
    ipv6: {enabled: false}
  routes:
    config:
    - {destination: 0.0.0.0/0, next-hop-interface: bond0, next-hop-address: 10.231.0.1, metric: 150, table-id: 254}
`

// netCut is B8's template: the one-NIC address, and for the live change
// cut ("changed") a second one on the same NIC.
func netCut(variant string) string {
	if variant == "changed" {
		return `ipAddresses:
  inventory-ip: pool-p
  extra-ip: pool-q
` + strings.Replace(netOneNIC, `[{ip: "{inventory-ip}", prefix-length: 24}]`,
			`[{ip: "{inventory-ip}", prefix-length: 24}, {ip: "{extra-ip}", prefix-length: 24}]`, 1)
	}
	return "ipAddresses:\n  inventory-ip: pool-p\n" + netOneNIC
}

// serverConfig is regserver's config for the lab, with the template variants t.
func serverConfig(t templates) string {
	return "registrations:\n" + registration(regA, netA) + registration(regDS, netDS(t.ds)) +
		registration(regBond, netBond) + registration(regDHCP, "ipAddresses:\n  inventory-ip: pool-e\n"+netOneNIC) +
		registration(regCut, netCut(t.cut)) + poolsYAML
}

// nodeConfig is a machine's /oem/registration/config.yaml: regserver's URL
// for registration reg, TPM authentication on /dev/tpmrm0 (the default
// device), and a static bootstrap network by the first NIC's MAC, since the
// segment has no DHCP.
func nodeConfig(reg, mac, bootIP string) string {
	return fmt.Sprintf(`elemental:
  registration:
    url: http://%s:%s/elemental/registration/%s-token
    auth: tpm
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
          address1={boot-ip}/24,%s
          dad-timeout=3000
          [ipv6]
          method=disabled
      ipAddresses:
        boot-ip:
          static:
          - mac: %s
            address: %s
`, serverIP, serverPort, reg, serverIP, mac, bootIP)
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pre + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// nodeConfigDHCP is the config of a machine on a segment with DHCP: the
// server's URL and TPM authentication, no bootstrap block.
func nodeConfigDHCP(reg string) string {
	return fmt.Sprintf(`elemental:
  registration:
    url: http://%s:%s/elemental/registration/%s-token
    auth: tpm
`, serverIP, serverPort, reg)
}
