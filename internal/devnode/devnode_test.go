package devnode

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
)

func TestCheckTPM(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "swtpm.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"", "/dev/null", "/dev/zero", "unix://" + sock} {
		if err := CheckTPM(host.Root("/"), ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for bad, says := range map[string]string{
		file:                  "a regular file",
		fifo:                  "a FIFO",
		dir:                   "a directory",
		"unix://" + file:      "a regular file",
		"unix:///dev/null":    "a character device",
		"dev/tpm0":            "absolute",
		"unix://rel/sock":     "absolute",
		"tcp://10.0.0.1:2321": "absolute",
	} {
		err := CheckTPM(host.Root("/"), bad)
		if !errors.Is(err, ErrNotTPM) || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want ErrNotTPM saying %q", bad, err, says)
		}
	}
	if err := CheckTPM(host.Root("/"), filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	// A block device, where the host has one.
	for _, b := range []string{"/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1"} {
		if fi, err := os.Stat(b); err == nil && fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0 {
			if err := CheckTPM(host.Root("/"), b); !errors.Is(err, ErrNotTPM) || !strings.Contains(err.Error(), "a block device") {
				t.Errorf("%s: %v", b, err)
			}
			t.Logf("%s: %v", b, CheckTPM(host.Root("/"), b))
			break
		}
	}
}
