package doccheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

var (
	// mdLink is a Markdown link's target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// repoPath is a backquoted path into the repository's own tree.
	repoPath = regexp.MustCompile("`((?:docs|examples|systemd|tests|cmd|agent|apply|bootstrap|protocol|server|internal|nmstate|netpolicy|machinereg|packaging|tpm|\\.ci)/[A-Za-z0-9_./*-]*)`")
	// outside names the background documents that live beside the
	// repository, not in it: a reader of the repository has none of them.
	outside = regexp.MustCompile(`\.\./shared|\b(PROTOCOL|REFERENCE|TPM|DESIGN|NMSTATE|VMLAB|STYLE)\.md`)
)

// TestDocsLinkOnlyIntoTheRepository: every relative link of README.md,
// examples/README.md and docs/*.md names a file or directory of the
// repository, every backquoted repository path exists (a Go symbol after
// its package, pkg.Name, and a go pattern, dir/..., name their directory),
// and no page points at the background documents outside it.
func TestDocsLinkOnlyIntoTheRepository(t *testing.T) {
	root := testbin.ModuleRoot()
	links, paths := 0, 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		node.Must(t, err)
		rel, _ := filepath.Rel(root, file)
		text := string(b)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			p, _, _ := strings.Cut(target, "#")
			full := filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
			if !within(root, full) {
				t.Errorf("%s: link %s leaves the repository", rel, target)
			} else if _, err := os.Stat(full); err != nil {
				t.Errorf("%s: link %s: no such file in the repository", rel, target)
			}
		}
		for _, m := range repoPath.FindAllStringSubmatch(text, -1) {
			paths++
			if !repoPathExists(root, m[1]) {
				t.Errorf("%s: `%s` is not in the repository", rel, m[1])
			}
		}
		for _, m := range outside.FindAllString(text, -1) {
			t.Errorf("%s names %s, which is not in the repository: point at docs/ instead", rel, m)
		}
	}
	if links == 0 || paths < 100 {
		t.Errorf("%d relative links and %d repository paths found: the patterns no longer match", links, paths)
	}
}

func within(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../")
}

func repoPathExists(root, p string) bool {
	full := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(strings.TrimSuffix(p, "/..."), "/")))
	if strings.Contains(p, "*") {
		m, _ := filepath.Glob(full)
		return len(m) > 0
	}
	if _, err := os.Stat(full); err == nil {
		return true
	}
	// pkg.Symbol: the package's directory.
	if i := strings.LastIndex(full, "."); i > strings.LastIndex(full, "/") {
		if fi, err := os.Stat(full[:i]); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}
