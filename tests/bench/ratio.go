package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// budgetDryRunRatio: a PLAIN dry-run registration may cost at most twice
// a process that does nothing (`agent version`): what it adds over the
// start of the process is one loopback conversation and the rendering.
const budgetDryRunRatio = 2.0

// ratioRows times `agent version` and a PLAIN `--dry-run` registration of
// one registered machine, alternating so that both see the same load.
func (b *bencher) ratioRows() []row {
	bin := b.bins["agent"]
	fail := func(err error) []row {
		return []row{{name: "agent: PLAIN dry run / agent version", unit: unitRatio, budget: budgetDryRunRatio, err: err}}
	}
	m, err := b.machine(authMAC)
	if err != nil {
		return fail(err)
	}
	if _, err := runAgent(bin, m, b.env); err != nil {
		return fail(fmt.Errorf("registering the dry-run machine: %w", err))
	}
	// Both are short: twice the runs of a line, for a steadier ratio.
	n := 2*b.o.runs + 1
	var version, dry, versionCPU, dryCPU []time.Duration
	for range n {
		r, err := timedExec(bin, b.env, "version")
		if err != nil {
			return fail(err)
		}
		version, versionCPU = append(version, r.wall), append(versionCPU, r.cpu)
		if r, err = runAgent(bin, m, b.env, "--dry-run"); err != nil {
			return fail(err)
		}
		dry, dryCPU = append(dry, r.wall), append(dryCPU, r.cpu)
	}
	v, d := median(version), median(dry)
	vc, dc := median(versionCPU), median(dryCPU)
	cpu := func(c time.Duration) string { return "CPU (user+sys) " + format(unitDuration, float64(c)) }
	return []row{
		{name: "agent version (process start and exit)", unit: unitDuration, value: float64(v), budget: noBudget(), note: "default build; " + cpu(vc)},
		{name: "agent run: PLAIN dry run (registered machine)", unit: unitDuration, value: float64(d), budget: noBudget(),
			note: "--dry-run: the conversation and the rendering, nothing written; " + cpu(dc)},
		// The CPU ratio is in the note: on a loaded machine the wall
		// times wait for the CPU, the CPU times much less so.
		{name: "agent: PLAIN dry run / agent version", unit: unitRatio, value: float64(d) / float64(v), budget: budgetDryRunRatio,
			note: fmt.Sprintf("wall-time medians of %d alternating runs; CPU-time ratio %.2f", n, float64(dc)/float64(vc))},
	}
}

// timedExec is one run of bin with args: its wall and CPU time.
func timedExec(bin string, env []string, args ...string) (procRun, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	r := procRun{wall: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if err != nil {
		return r, fmt.Errorf("%s %v: %w\n%s", bin, args, err, tail(out.Bytes(), 1500))
	}
	return r, nil
}
