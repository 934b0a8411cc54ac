package node

// NmstateTemplate is the network template of the foundation issue (and of
// cmd/regserver/example.yaml), indented to sit under a registration's
// `network:` key in a regserver config. Its address comes from pool-a.
const NmstateTemplate = `
    configurator: nmstate
    ipAddresses:
      inventory-ip: pool-a
    config:
      interfaces:
      - name: enp1s0
        type: ethernet
        description: Main-NIC
        state: up
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
        ipv6: {enabled: false}
      routes:
        config:
        - {destination: 0.0.0.0/0, next-hop-interface: enp1s0, next-hop-address: 192.168.122.1, metric: 150, table-id: 254}
      dns-resolver:
        config: {server: [192.168.122.1], search: []}
`
