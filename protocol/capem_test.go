package protocol

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const localPEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIBATAKBggqhkjOPQQDAjA=\n-----END CERTIFICATE-----\n"

// TestCAPEM: the one CA loader reads PEM text or a regular file, and
// refuses what would block it or grow it.
func TestCAPEM(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, []byte(localPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pem")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{localPEM, file} {
		if b, err := CAPEM(ok); err != nil || string(b) != localPEM {
			t.Errorf("%.30q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/dev/zero", fifo, link, filepath.Join(dir, "none.pem"), "-----BEGIN nothing"} {
		b, err := CAPEM(bad)
		if err == nil || b != nil || !strings.HasPrefix(err.Error(), "ca-cert: ") {
			t.Errorf("%q: %d bytes, %v", bad, len(b), err)
		}
		if _, err := TLSConfig(bad, true); err == nil {
			t.Errorf("TLSConfig(%q) accepted", bad)
		}
	}
}
