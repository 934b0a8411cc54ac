// Package hostpath maps the host's absolute paths below the agent's --root,
// the one place that rule lives (tests and image builds run with a scratch
// root; the node with "/").
package hostpath

import "path/filepath"

// Join returns p (an absolute host path) below root; root "" or "/" is the
// host itself.
func Join(root, p string) string {
	if root == "" || root == "/" {
		return filepath.Clean(p)
	}
	return filepath.Join(root, p)
}
