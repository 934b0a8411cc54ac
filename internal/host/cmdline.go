package host

import (
	"io/fs"
	"os"
)

// What a command line needs of the host before any run builds its FS
// (agent.newEnv): whether a --root is the host itself, and whether the
// directory it names is there.

// LiveRoot says whether --root names the host itself, as Live will say of
// the FS a run builds from it.
func LiveRoot(root string) bool { return Live(Root(root)) }

// StatInput is os.Stat of a path an operator names on the command line
// (the --root directory itself), as ReadInput reads one: never a host path
// below --root, which goes through FS.
func StatInput(p string) (fs.FileInfo, error) { return os.Stat(p) }
