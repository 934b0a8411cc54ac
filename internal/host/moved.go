package host

import (
	"fmt"
	"path"
	"strings"
)

// KernelDirs are the kernel's own file systems. --root moves them with
// every other host path, so a scratch root without them has no NICs, no
// DMI table and no TPM (docs/cli.md, "--root"). Nothing is taken from the
// live system behind the root's back: a preview of some other machine
// must not quietly describe this one.
var KernelDirs = []string{"/sys", "/proc", "/dev"}

// MovedHint is, for a host path p that could not be found in files, the
// sentence saying that --root moved it and how to give the root its own;
// "" when files is the host itself, p is not below a KernelDirs entry, or
// the root has that directory (then the file itself is what is missing).
func MovedHint(files FS, p string) string {
	if files.Path("/") == "/" {
		return ""
	}
	top := "/" + strings.SplitN(strings.TrimPrefix(path.Clean("/"+p), "/"), "/", 2)[0]
	for _, d := range KernelDirs {
		if _, err := files.Lstat(d); top == d && err != nil {
			return fmt.Sprintf("--root moves %s too, and %s has none: bind the machine's own there (mount --bind %s %s) or copy the files it needs", d, files.Path("/"), d, files.Path(d))
		}
	}
	return ""
}
