// Package hostpath maps the host's absolute paths below the agent's --root,
// the one place that rule lives (tests and image builds run with a scratch
// root; the node with "/").
package hostpath

import "path/filepath"

// Join returns p (a host path) below root; root "" or "/" is the host
// itself, where a relative p stays relative to the working directory. Below
// a root, p is taken from the root's "/", so ".." cannot climb out of it.
func Join(root, p string) string {
	if root == "" || root == "/" {
		return filepath.Clean(p)
	}
	return filepath.Join(root, filepath.Clean("/"+p))
}
