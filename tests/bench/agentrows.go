package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-tpm/tpm2"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/tpm"
)

func (b *bencher) agentRuns() []row {
	var rows []row
	agentBin, emuBin := b.bins["agent"], b.bins["agent-emulated"]

	plainCold, err := b.cold(agentBin, b.o.runs, func(int) string { return authMAC }, nil)
	rows = append(rows, plainCold.row("agent run: PLAIN first boot (register, gc, apply, commit)", 0, "new machine each run", err))

	var plainWarm *series
	m, err := b.machine(authMAC)
	if err == nil {
		plainWarm, err = b.warm(agentBin, b.o.runs, m)
	}
	if plainWarm == nil {
		plainWarm = &series{}
	}
	rows = append(rows, plainWarm.row("agent run: PLAIN warm boot, config unchanged", budgetWarmRun, "update, nothing to apply", err))

	emuCold, err := b.cold(emuBin, b.o.runs, func(i int) string { return emulatedCfg(1000 + b.nextM) }, nil)
	rows = append(rows, emuCold.row("agent run: emulated TPM cold (fresh state)", budgetColdEmulated, "new seed each run: EK, SRK, AK made", err))

	var emuWarm *series
	m, err = b.machine(emulatedCfg(7))
	if err == nil {
		emuWarm, err = b.warm(emuBin, b.o.runs, m)
	}
	if emuWarm == nil {
		emuWarm = &series{}
	}
	rows = append(rows, emuWarm.row("agent run: emulated TPM warm (cached AK)", budgetWarmRun, "config unchanged", err))

	if haveSwtpm() {
		rows = append(rows, b.swtpmRuns()...)
	} else {
		rows = append(rows, row{name: "agent run: swtpm", budget: noBudget(), note: "skipped: swtpm not installed (apt-get install swtpm swtpm-tools)"})
	}

	// Peak RSS: /usr/bin/time -v as docs/performance.md reports it, wait4's rusage when it
	// is absent. Both include the nmstatectl children the agent waited for.
	rssRow := b.peakRSS(agentBin)
	if rssRow.err == nil {
		rssRow.note += fmt.Sprintf("; wait4 max over the runs above: first boot %s, warm %s", format(unitBytes, maxF(plainCold.rss)), format(unitBytes, maxF(plainWarm.rss)))
	}
	rows = append(rows, rssRow)
	rows = append(rows, row{name: "agent peak RSS: emulated TPM cold (emulated build)", unit: unitBytes,
		value: medianFloat(emuCold.rss), budget: noBudget(), note: "wait4 rusage; the simulator is not in the default build", err: nonEmpty(emuCold.rss)})
	return rows
}

// peakRSS measures first boots of new machines under /usr/bin/time -v.
func (b *bencher) peakRSS(agentBin string) row {
	r := row{name: "agent peak RSS: PLAIN first boot (default build)", unit: unitBytes, budget: budgetRSS, note: "/usr/bin/time -v"}
	_, err := exec.LookPath("/usr/bin/time")
	useTime := err == nil
	if !useTime {
		r.note = "wait4 rusage (/usr/bin/time absent: apt-get install time)"
	}
	var vals []float64
	for range b.o.tpmRuns {
		m, err := b.machine(authMAC)
		if err != nil {
			r.err = err
			return r
		}
		var rss int64
		if useTime {
			rss, err = timeV(agentBin, m, b.env)
		} else {
			var pr procRun
			pr, err = runAgent(agentBin, m, b.env)
			rss = pr.maxRSS
		}
		if err != nil {
			r.err = err
			return r
		}
		vals = append(vals, float64(rss))
	}
	r.value = medianFloat(vals)
	return r
}

func nonEmpty(v []float64) error {
	if len(v) == 0 {
		return errors.New("no run to measure")
	}
	return nil
}

func maxF(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}

// swtpmRuns: cold runs each get a new swtpm (fresh TPM state), warm runs
// share one whose SRK and EK were persisted by the first run.
func (b *bencher) swtpmRuns() []row {
	agentBin := b.bins["agent"]
	var sw *swtpm
	cold, err := b.cold(agentBin, b.o.tpmRuns, func(int) string { return "" }, func(m *machine) (func(), error) {
		var err error
		sw, err = startSwtpm(m.root+"-swtpm", false)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(host.Root(m.root).Path("oem/registration/config.yaml"),
			[]byte("elemental:\n  registration:\n    url: "+b.rs.tpmURL()+"\n    auth: tpm\n    tpm-device: "+sw.device()+"\n"), 0o600); err != nil {
			sw.stop()
			return nil, err
		}
		return sw.stop, nil
	})
	rows := []row{cold.row("agent run: swtpm cold (fresh TPM state)", 0, "RSA key generation in swtpm dominates", err)}

	warm := &series{}
	m, err := b.machine("")
	if err == nil {
		sw, err = startSwtpm(filepath.Join(b.work, "swtpm-warm"), false)
	}
	if err == nil {
		defer sw.stop()
		err = os.WriteFile(host.Root(m.root).Path("oem/registration/config.yaml"),
			[]byte("elemental:\n  registration:\n    url: "+b.rs.tpmURL()+"\n    auth: tpm\n    tpm-device: "+sw.device()+"\n"), 0o600)
	}
	if err == nil {
		warm, err = b.warm(agentBin, b.o.tpmRuns, m)
	}
	if warm == nil {
		warm = &series{}
	}
	rows = append(rows, warm.row("agent run: swtpm warm (persisted EK/SRK, cached AK)", budgetWarmRun, "", err))
	return rows
}

// tpmCountRows counts TPM commands of a registration in-process, with
// swtpm (persistent state, like a real TPM) and with the emulated TPM.
func (b *bencher) tpmCountRows() []row {
	var rows []row
	countRow := func(name string, v int, budget float64, note string, err error) row {
		return row{name: name, unit: unitCount, value: float64(v), budget: budget, note: note, err: err}
	}
	for _, v := range []struct {
		what   string
		ekCert bool
	}{{"swtpm", false}, {"swtpm+EK cert", true}} {
		switch {
		case !haveSwtpm():
			rows = append(rows, row{name: "TPM commands: " + v.what, budget: noBudget(), note: "skipped: swtpm not installed (apt-get install swtpm swtpm-tools)"})
			continue
		case v.ekCert && !haveSwtpmSetup():
			rows = append(rows, row{name: "TPM commands: " + v.what, budget: noBudget(), note: "skipped: swtpm_setup not installed (apt-get install swtpm-tools)"})
			continue
		}
		c, err := b.swtpmCounts(v.what, v.ekCert)
		if c == nil {
			c = &tpmCounts{}
		}
		rows = append(rows,
			countRow("TPM commands: "+v.what+" cold registration", c.cold.Commands, budgetColdTPMCmds, fmt.Sprintf("%d key creations (%d CreatePrimary, %d Create); %s", c.cold.KeyCreations(), c.cold.CreatePrimary, c.cold.Create, uncounted), err),
			countRow("TPM commands: "+v.what+" warm registration", c.warm.Commands, noBudget(), uncounted, err),
			countRow("TPM key creations: "+v.what+" warm", c.warm.KeyCreations(), budgetWarmKeys, "CreatePrimary + Create", err))
	}

	var c *tpmCounts
	var err error
	if !tpm.EmulationAvailable {
		err = errors.New("bench built without the emulated TPM: CGO_ENABLED=1 go run -tags emulatedtpm ./tests/bench")
	} else {
		var m *machine
		if m, err = b.machine(emulatedCfg(424242)); err == nil {
			c, err = measureTPM(m)
		}
	}
	if c == nil {
		c = &tpmCounts{}
	}
	b.byCommand("emulated cold", c.cold)
	b.byCommand("emulated warm", c.warm)
	rows = append(rows,
		countRow("TPM commands: emulated cold registration", c.cold.Commands, budgetColdTPMCmds, fmt.Sprintf("%d key creations (%d CreatePrimary, %d Create); %s", c.cold.KeyCreations(), c.cold.CreatePrimary, c.cold.Create, uncounted), err),
		countRow("TPM commands: emulated warm registration", c.warm.Commands, noBudget(), uncounted, err),
		countRow("TPM AK creations: emulated warm", c.warm.Create, budgetWarmKeys,
			fmt.Sprintf("+%d CreatePrimary: the simulator starts empty at every open, EK and SRK are re-derived", c.warm.CreatePrimary), err))
	return rows
}

// uncounted: agent.Result.TPM is read after the run closes the TPM
// (agent's env.close), so the closing FlushContexts are in the counts.
const uncounted = "incl. the FlushContexts at close (docs/performance.md)"

// swtpmCounts registers a machine twice in-process on a fresh swtpm.
func (b *bencher) swtpmCounts(what string, ekCert bool) (*tpmCounts, error) {
	m, err := b.machine("")
	if err != nil {
		return nil, err
	}
	sw, err := startSwtpm(m.root+"-swtpm", ekCert)
	if err != nil {
		return nil, err
	}
	defer sw.stop()
	if err := os.WriteFile(host.Root(m.root).Path("oem/registration/config.yaml"),
		[]byte("elemental:\n  registration:\n    url: "+b.rs.tpmURL()+"\n    auth: tpm\n    tpm-device: "+sw.device()+"\n"), 0o600); err != nil {
		return nil, err
	}
	c, err := measureTPM(m)
	if err != nil {
		return nil, err
	}
	b.byCommand(what+" cold", c.cold)
	b.byCommand(what+" warm", c.warm)
	return c, nil
}

func (b *bencher) byCommand(what string, c tpm.Counts) {
	if !b.o.verbose || c.Commands == 0 {
		return
	}
	var parts []string
	for cc, n := range c.ByCommand {
		name := tpmCCName(cc)
		parts = append(parts, fmt.Sprintf("%s=%d", name, n))
	}
	sort.Strings(parts)
	fmt.Fprintf(b.diag, "TPM commands, %s (%d): %s\n", what, c.Commands, strings.Join(parts, " "))
}

func tpmCCName(cc tpm2.TPMCC) string {
	names := map[tpm2.TPMCC]string{
		tpm2.TPMCCCreatePrimary: "CreatePrimary", tpm2.TPMCCCreate: "Create", tpm2.TPMCCLoad: "Load",
		tpm2.TPMCCReadPublic: "ReadPublic", tpm2.TPMCCNVReadPublic: "NV_ReadPublic", tpm2.TPMCCNVRead: "NV_Read",
		tpm2.TPMCCGetCapability: "GetCapability", tpm2.TPMCCCertifyCreation: "CertifyCreation",
		tpm2.TPMCCFlushContext: "FlushContext", tpm2.TPMCCEvictControl: "EvictControl",
		tpm2.TPMCCActivateCredential: "ActivateCredential", tpm2.TPMCCStartAuthSession: "StartAuthSession",
		tpm2.TPMCCPolicySecret: "PolicySecret",
	}
	if n, ok := names[cc]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", uint32(cc))
}
