package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/nic"
)

// ErrNoIdentifier is returned when no usable PLAIN identifier exists.
var ErrNoIdentifier = errors.New("no usable identifier")

// MACAddress returns the PLAIN `mac` identifier (docs/protocol.md §4.3): the
// lexicographically smallest permanent MAC of a non-virtual interface,
// including interfaces that are down, on the machine files reaches. The
// rule for "permanent" is nic.PermanentMACs, the one the bootstrap facts
// use.
func MACAddress(files host.FS) (string, error) {
	dir := files.Path(host.SysClassNet)
	macs, err := nic.PermanentMACs(files)
	if err != nil {
		return "", fmt.Errorf("mac identifier: reading %s: %w%s", dir, err, moved(files, host.SysClassNet, err))
	}
	if len(macs) == 0 {
		return "", fmt.Errorf("mac identifier: no physical interface with a permanent MAC under %s: %w", dir, ErrNoIdentifier)
	}
	return macs[0], nil
}

// SystemUUID returns the PLAIN `sys-uuid` identifier (docs/protocol.md §4.3): the
// SMBIOS product UUID as the kernel exports it, case preserved.
//
// Upstream sends ghw's "unknown" when the file cannot be read; every such
// machine would then share one hash and take over each other's inventory,
// so an unreadable file is an error here.
func SystemUUID(files host.FS) (string, error) {
	p := path.Join(host.DMIIDDir, "product_uuid")
	b, err := files.ReadFile(p, host.MaxAttr)
	if err != nil {
		return "", fmt.Errorf("sys-uuid identifier: %w (%w)%s", err, ErrNoIdentifier, moved(files, p, err))
	}
	id := strings.TrimSpace(string(b))
	switch {
	case id == "", id == "Unspecified", id == "None", strings.HasPrefix(id, "Not "):
		return "", fmt.Errorf("sys-uuid identifier: %s holds %q: %w", files.Path(p), id, ErrNoIdentifier)
	}
	return id, nil
}

// moved is "; " and host.MovedHint for a path --root took away, else "".
func moved(files host.FS, p string, err error) string {
	if h := host.MovedHint(files, p); h != "" && errors.Is(err, fs.ErrNotExist) {
		return "; " + h
	}
	return ""
}
