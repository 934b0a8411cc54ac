package nic

import "net"

// The kernel's interface table (rtnetlink, through the standard library):
// the live system's interfaces, whatever --root says, for --root has no
// kernel of its own. It is read here alone (tests/edge holds every other
// package of the agent to that), so that a reader of the agent finds in one
// place what it asks the running kernel, beside the permanent MACs.

// ByName is the kernel's interface named name: its index, flags and
// hardware address, and its addresses through Addrs.
func ByName(name string) (*net.Interface, error) { return net.InterfaceByName(name) }

// Interfaces lists the kernel's interfaces.
func Interfaces() ([]net.Interface, error) { return net.Interfaces() }
