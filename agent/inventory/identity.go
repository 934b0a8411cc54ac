package inventory

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
)

// ErrNoIdentifier is returned when no usable PLAIN identifier exists.
var ErrNoIdentifier = errors.New("no usable identifier")

// MACAddress returns the PLAIN `mac` identifier (docs/protocol.md §4.3): the
// lexicographically smallest permanent MAC of a non-virtual interface,
// including interfaces that are down, on the machine files reaches.
func MACAddress(files host.FS) (string, error) {
	dir := files.Path(host.SysClassNet)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("mac identifier: reading %s: %w", dir, err)
	}
	best := ""
	for _, e := range entries {
		name := e.Name()
		if name == "lo" || name == "bonding_masters" {
			continue
		}
		if dest, err := os.Readlink(filepath.Join(dir, name)); err == nil && strings.Contains(dest, "devices/virtual/net") {
			continue
		}
		// Only permanent addresses (type 0) identify the hardware; random
		// or stolen ones change or are shared (bonds, bridges).
		if readTrim(filepath.Join(dir, name, "addr_assign_type")) != "0" {
			continue
		}
		mac := readTrim(filepath.Join(dir, name, "address"))
		if mac == "" || mac == "00:00:00:00:00:00" {
			continue
		}
		if best == "" || mac < best {
			best = mac
		}
	}
	if best == "" {
		return "", fmt.Errorf("mac identifier: no physical interface with a permanent MAC under %s: %w", dir, ErrNoIdentifier)
	}
	return best, nil
}

// SystemUUID returns the PLAIN `sys-uuid` identifier (docs/protocol.md §4.3): the
// SMBIOS product UUID as the kernel exports it, case preserved.
//
// Upstream sends ghw's "unknown" when the file cannot be read; every such
// machine would then share one hash and take over each other's inventory,
// so an unreadable file is an error here.
func SystemUUID(files host.FS) (string, error) {
	path := files.Path(filepath.Join(dmiIDDir, "product_uuid"))
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("sys-uuid identifier: %w (%w)", err, ErrNoIdentifier)
	}
	id := strings.TrimSpace(string(b))
	switch {
	case id == "", id == "Unspecified", id == "None", strings.HasPrefix(id, "Not "):
		return "", fmt.Errorf("sys-uuid identifier: %s holds %q: %w", path, id, ErrNoIdentifier)
	}
	return id, nil
}
