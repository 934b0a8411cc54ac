// Package devnode checks a TPM device setting before anything opens it.
// With auth: tpm the agent writes TPM commands to the device: given a block
// device (say /dev/sda) it would write them onto a disk (docs/reliability.md,
// "Hostile server").
package devnode

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/safefile"
)

// ErrNotTPM: the setting names something that cannot be a TPM.
var ErrNotTPM = errors.New("is not a TPM device")

// UnixPrefix marks swtpm's data socket in a tpm-device setting.
const UnixPrefix = "unix://"

// CheckTPM accepts elemental.registration.tpm-device when it is empty (the
// agent then picks /dev/tpmrm0 or /dev/tpm0), an absolute path to a
// character device, or unix:///path to a socket, as files (the machine's
// devices the TPM is opened through) has it. A missing device or socket is
// reported as such (fs.ErrNotExist), anything else as ErrNotTPM.
func CheckTPM(files host.FS, dev string) error {
	if dev == "" {
		return nil
	}
	path, want, what := dev, fs.ModeCharDevice, "a character device"
	if rest, ok := strings.CutPrefix(dev, UnixPrefix); ok {
		path, want, what = rest, fs.ModeSocket, "a unix socket"
	}
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("tpm-device %q: %w: neither an absolute device path nor unix:///path", dev, ErrNotTPM)
	}
	fi, err := files.Stat(path)
	if err != nil {
		return fmt.Errorf("tpm-device: %w", err)
	}
	if fi.Mode()&want == 0 {
		return fmt.Errorf("tpm-device %s: %w: it is %s, not %s", dev, ErrNotTPM, safefile.Kind(fi.Mode()), what)
	}
	return nil
}
