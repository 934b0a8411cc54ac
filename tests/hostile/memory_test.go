package hostile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

// childEnv names the bomb a child process decodes; the parent measures the
// child's peak RSS, which a test in the same process cannot do.
const (
	childEnv    = "NODEREG_HOSTILE_DECODE"
	childDocEnv = "NODEREG_HOSTILE_DOC"
)

// maxDecodeRSS is docs/reliability.md's goal ("Hostile server") for the agent on any reply under the
// frame limit. The child is a test binary doing nothing else, so its peak
// is the decode's cost plus the Go runtime's floor.
const maxDecodeRSS = 100 << 20

// decodeChild runs in the child: read the reply the parent wrote, decode
// it, report, exit. Generating the reply here would count its cost too.
func decodeChild(name string) {
	for _, b := range bombs {
		if b.name != name {
			continue
		}
		doc, err := os.ReadFile(os.Getenv(childDocEnv))
		if err != nil {
			fmt.Println(err)
			os.Exit(5)
		}
		var cfg protocol.Config
		_, err = protocol.DecodeConfigReply(doc, &cfg)
		fmt.Printf("%d %d bytes: %v\n", peakRSS(), len(doc), err)
		if err != nil && !errors.Is(err, protocol.ErrReplyTooLarge) {
			os.Exit(3)
		}
		if (err == nil) != b.accepted {
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(4)
}

// peakRSS is this process's VmHWM in bytes. The rusage of a child is no
// use here: exec records the parent's high-water mark as the child's.
func peakRSS() int {
	b, _ := os.ReadFile("/proc/self/status")
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int
			fmt.Sscan(rest, &kb)
			return kb << 10
		}
	}
	return -1
}

// TestReplyBudgetPeakRSS decodes each hostile reply in a process of its own
// and reports its peak RSS: every reply under the frame limit, refused or
// admitted, stays under 100 MB.
func TestReplyBudgetPeakRSS(t *testing.T) {
	// Parallel: each reply is decoded in a child process, whose own peak RSS
	// is what is measured, so other tests beside it do not change it.
	t.Parallel()
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			doc := filepath.Join(t.TempDir(), "reply.yaml")
			if err := os.WriteFile(doc, b.doc(), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+b.name, childDocEnv+"="+doc)
			out, err := cmd.CombinedOutput()
			line := strings.TrimSpace(string(out))
			if err != nil {
				t.Fatalf("child: %v: %s", err, line)
			}
			var rss int
			if _, err := fmt.Sscan(line, &rss); err != nil || rss <= 0 {
				t.Fatalf("child did not report its peak RSS: %s", line)
			}
			t.Logf("peak RSS %d MB; %s", rss>>20, line[strings.IndexByte(line, ' ')+1:])
			if rss > maxDecodeRSS {
				t.Errorf("peak RSS %d MB, the goal is %d MB", rss>>20, maxDecodeRSS>>20)
			}
		})
	}
}

// TestAliasBombReplyShape: the generated reply has the shape docs/reliability.md
// describes ("Hostile server").
func TestAliasBombReplyShape(t *testing.T) {
	doc := issueReply()
	if len(doc) < 4_000_000 || len(doc) > protocol.DefaultMaxFrame {
		t.Errorf("%d bytes", len(doc))
	}
	if !strings.Contains(string(doc), "    k0: [0, 0, ") || !strings.HasSuffix(string(doc), ", *b]\n") {
		t.Errorf("unexpected shape: %.200s", doc)
	}
}

// BenchmarkDecodeIssueReply: allocation of refusing the reply of item 1.
func BenchmarkDecodeIssueReply(b *testing.B) {
	for _, bm := range bombs {
		b.Run(bm.name, func(b *testing.B) {
			doc := bm.doc()
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				var cfg protocol.Config
				_, _ = protocol.DecodeConfigReply(doc, &cfg)
			}
		})
	}
}
