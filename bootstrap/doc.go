// Package bootstrap brings a machine with no DHCP on its provisioning
// network far enough to reach the registration server: it reads the local
// elemental.registration.bootstrap-network settings, picks this machine's
// address from a static table (matched by permanent MAC, SMBIOS serial or
// system UUID) or from a range shared by every machine of an image, checks
// a range address is free with RFC 5227 ARP probes, and returns an ordinary
// protocol.NetworkConfig with the addresses filled in. The agent renders and
// writes that config with package apply, exactly like the server's, into
// NetworkManager's runtime keyfile directory (docs/bootstrap.md).
package bootstrap
