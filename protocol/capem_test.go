package protocol

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
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
		if b, err := CAPEM(host.Root("/"), ok); err != nil || string(b) != localPEM {
			t.Errorf("%.30q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/dev/zero", fifo, link, filepath.Join(dir, "none.pem"), "-----BEGIN nothing"} {
		b, err := CAPEM(host.Root("/"), bad)
		if err == nil || b != nil || !strings.HasPrefix(err.Error(), "ca-cert: ") {
			t.Errorf("%q: %d bytes, %v", bad, len(b), err)
		}
		if _, err := TLSConfig(bad, true); err == nil {
			t.Errorf("TLSConfig(%q) accepted", bad)
		}
	}
}

// A file named by a ca-cert is read through the FS it is handed, as --root
// has it, and only there: TLSConfig and a nil FS take PEM text alone.
func TestCAPEMReadsThroughTheFS(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A name no machine has outside this root.
	name := "/etc/" + filepath.Base(root) + "-ca.pem"
	if err := os.WriteFile(filepath.Join(root, name), []byte(localPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := CAPEM(host.Root(root), name); err != nil || string(b) != localPEM {
		t.Errorf("CAPEM under the root: %q, %v", b, err)
	}
	for _, files := range []host.FS{nil, host.Root("/")} {
		if _, err := CAPEM(files, name); err == nil {
			t.Errorf("CAPEM(%v) read the root's file outside it", files)
		}
	}
	if _, err := TLSConfig(filepath.Join(root, name), true); err == nil {
		t.Error("TLSConfig took a file name")
	}
}
