package node

// BootstrapKeyfile is a nodereg bootstrap-network block with one
// nmconnections keyfile that puts the placeholder {boot-ip} on one
// interface, for tests of the bootstrap network; only the parts tests
// vary are fields.
type BootstrapKeyfile struct {
	Key     string // the keyfile's name under config
	ID      string // its connection id
	Iface   string // its interface-name
	Gateway string // "" for none
	// Sources is the YAML under ipAddresses.boot-ip (static: or range:),
	// indented by ten spaces.
	Sources string
}

// Block is the block indented to sit under elemental.registration.
func (b BootstrapKeyfile) Block() string {
	addr := "{boot-ip}/24"
	if b.Gateway != "" {
		addr += "," + b.Gateway
	}
	return `    bootstrap-network:
      configurator: nmconnections
      config:
        ` + b.Key + `: |
          [connection]
          id=` + b.ID + `
          type=ethernet
          interface-name=` + b.Iface + `
          [ipv4]
          method=manual
          address1=` + addr + `
      ipAddresses:
        boot-ip:
` + b.Sources
}

// File is a whole config file holding only the block.
func (b BootstrapKeyfile) File() string {
	return "elemental:\n  registration:\n" + b.Block()
}
