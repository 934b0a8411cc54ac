package nmstate

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

var seedDesired = []byte(strings.ReplaceAll(seedTemplate, "{inventory-ip}", "10.88.0.2"))

// BenchmarkSeedTemplate: render time of the seed template's keyfile.
func BenchmarkSeedTemplate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := GenerateKeyfiles(seedDesired); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSeedTemplateStandIn: the same render through a process, as the
// agent does it when nmstatectl is installed: start the nmstatectl
// stand-in of tests/stubs, `gc -` the state on stdin, decode its YAML
// ([[name, text], ...] under NetworkManager, what apply's parseGC reads).
// The real nmstatectl does more work per call; this is a lower bound.
func BenchmarkSeedTemplateStandIn(b *testing.B) {
	bin := testbin.NmstatectlStub(b)
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command(bin, "gc", "-")
		cmd.Stdin = bytes.NewReader(seedDesired)
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		var doc map[string][][]string
		if err := yaml.Unmarshal(out, &doc); err != nil || len(doc["NetworkManager"]) != 1 {
			b.Fatalf("stand-in output %q: %v", out, err)
		}
	}
}
