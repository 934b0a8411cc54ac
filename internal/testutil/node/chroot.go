package node

import (
	"os"
	"os/exec"
	"path/filepath"
)

// ChrootRun runs cmd with /bin/sh chrooted into the scratch root, as
// Elemental runs the initramfs stage chrooted into the node's root: a guard
// or sentinel check sees the root's /run and /oem, not the host's. The
// host's /usr is bound read-only into the root for the shell, in a private
// mount namespace that ends with the command. PrepareShellRoot must have
// run on root.
func ChrootRun(root, cmd string, opts ...func(*exec.Cmd)) (string, error) {
	e := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind /usr "$1/usr" && mount -o remount,bind,ro "$1/usr" && exec chroot "$1" /bin/sh -c "$2"`, "sh", root, cmd)
	for _, o := range opts {
		o(e)
	}
	out, err := e.CombinedOutput()
	return string(out), err
}

// PrepareShellRoot gives the scratch root what ChrootRun needs: an empty
// /usr to mount over and Debian's merged-/usr links.
func PrepareShellRoot(root string) error {
	if err := os.MkdirAll(filepath.Join(root, "usr"), 0o755); err != nil {
		return err
	}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if _, err := os.Lstat(filepath.Join(root, d)); err == nil {
			continue
		}
		if err := os.Symlink("usr/"+d, filepath.Join(root, d)); err != nil {
			return err
		}
	}
	return nil
}
