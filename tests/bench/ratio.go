package main

import (
	"bytes"
	"fmt"
	"os/exec"
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
	var version, dry []time.Duration
	for range n {
		d, err := timedExec(bin, b.env, "version")
		if err != nil {
			return fail(err)
		}
		version = append(version, d)
		r, err := runAgent(bin, m, b.env, "--dry-run")
		if err != nil {
			return fail(err)
		}
		dry = append(dry, r.wall)
	}
	v, d := median(version), median(dry)
	return []row{
		{name: "agent version (process start and exit)", unit: unitDuration, value: float64(v), budget: noBudget(), note: "default build"},
		{name: "agent run: PLAIN dry run (registered machine)", unit: unitDuration, value: float64(d), budget: noBudget(), note: "--dry-run: the conversation and the rendering, nothing written"},
		{name: "agent: PLAIN dry run / agent version", unit: unitRatio, value: float64(d) / float64(v), budget: budgetDryRunRatio,
			note: fmt.Sprintf("ratio of the medians of %d alternating runs", n)},
	}
}

// timedExec is the wall time of one run of bin with args.
func timedExec(bin string, env []string, args ...string) (time.Duration, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s %v: %w\n%s", bin, args, err, tail(out.Bytes(), 1500))
	}
	return d, nil
}
