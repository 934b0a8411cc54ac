package host

import (
	"os"
	"strings"
	"testing"
)

// Under a root other than /, a path below /sys, /proc or /dev gets the
// sentence naming what --root moved and the bind mount that gives it
// back; the host itself and other paths get none.
func TestMovedHint(t *testing.T) {
	for _, c := range []struct {
		root, p, want string
	}{
		{"/", "/sys/class/net", ""},
		{"", "/sys/class/net", ""},
		{"/r", "/oem/registration/config.yaml", ""},
		{"/r", "/system/x", ""},
		{"/r", "/sys/class/net", "--root moves /sys too, and /r has none: bind the machine's own there (mount --bind /sys /r/sys)"},
		{"/r", "/proc/sys/kernel/hostname", "mount --bind /proc /r/proc"},
		{"/r", "/dev/tpmrm0", "mount --bind /dev /r/dev"},
	} {
		got := MovedHint(Root(c.root), c.p) // "/r" does not exist: no sys, proc or dev under it
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("MovedHint(%q, %q) = %q, want %q", c.root, c.p, got, c.want)
		}
	}
}

// A root with a sys/ of its own gets no hint: the file is what is missing.
func TestMovedHintOnlyForAMissingKernelDir(t *testing.T) {
	root := t.TempDir()
	if MovedHint(Root(root), "/sys/class/net") == "" {
		t.Fatal("no hint for a root without sys/")
	}
	if err := os.Mkdir(root+"/sys", 0o755); err != nil {
		t.Fatal(err)
	}
	if h := MovedHint(Root(root), "/sys/class/net"); h != "" {
		t.Errorf("a root with its own sys/: %q", h)
	}
}
