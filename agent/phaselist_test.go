package agent

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// docs/architecture.md quotes phaseList: its hand-off block names the
// phases in the list's order, each with the modes it runs in, so the page
// cannot drift from what Run executes.
func TestArchitecturePageQuotesThePhaseList(t *testing.T) {
	b, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "returns what it produces (agent/handoff.go)")
	if i < 0 {
		t.Fatal("docs/architecture.md has no hand-off block")
	}
	block := text[i:]
	start := strings.Index(block, "```\n")
	end := strings.Index(block[start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the hand-off block is not a code block")
	}
	var page []Phase
	boot, other := map[Phase]bool{}, map[Phase]bool{}
	for _, line := range strings.Split(strings.TrimSpace(block[start+4:start+4+end]), "\n") {
		p := Phase(strings.Fields(line)[0])
		page = append(page, p)
		boot[p] = !strings.HasSuffix(line, "(install, reset)")
		other[p] = !strings.HasSuffix(line, "(boot)")
	}
	var list []Phase
	for _, s := range phaseList {
		list = append(list, s.phase)
		if s.modes(ModeBoot) != boot[s.phase] || s.modes(ModeInstall) != other[s.phase] || s.modes(ModeReset) != other[s.phase] {
			t.Errorf("phase %s: the page's modes (boot %v, install/reset %v) are not phaseList's", s.phase, boot[s.phase], other[s.phase])
		}
	}
	if !slices.Equal(page, list) {
		t.Errorf("the page lists %v, phaseList is %v", page, list)
	}
	want := []Phase{PhaseConfig, PhaseState, PhaseIdentity, PhaseBootstrap, PhaseRegister, PhaseFetchNetwork, PhasePlan, PhaseApply, PhaseFinish}
	if !slices.Equal(Phases(ModeBoot), want) {
		t.Errorf("Phases(boot) = %v, want %v", Phases(ModeBoot), want)
	}
}
