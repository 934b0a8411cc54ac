// Package inventory collects the hardware data a node sends when it
// registers: the SMBIOS map (MsgSmbios), the ghw label map (MsgSystemDataV2)
// with its legacy twin (MsgSystemData), the annotations and the labels, and
// the PLAIN identifiers (MAC address, system UUID).
//
// Every path is read under a root prefix so tests run on fake trees. A module
// that fails degrades its own family only; the registration goes on with what
// was collected.
package inventory
