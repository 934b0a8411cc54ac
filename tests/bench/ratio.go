package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// budgetDryRunRatio: a PLAIN dry-run registration may cost at most twice
// the CPU of a process that does nothing (`agent version`): what it adds
// over the start of the process is one loopback conversation, the
// inventory and the rendering.
const budgetDryRunRatio = 2.0

// budgetVersionRatio: `agent version` may cost at most three times the
// CPU of a hello-world Go binary: the agent's start-up (package
// initialisation, the command tree) is what it adds.
const budgetVersionRatio = 3.0

// helloWorld is the smallest Go program that prints: the floor of any
// Go process's start and exit on this machine.
const helloWorld = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n"

// ratioRows times a hello-world Go binary, `agent version` and a PLAIN
// `--dry-run` registration of one registered machine (and, unbudgeted,
// the same dry run with the built-in translator), in turns so that all
// see the same load. The budgets are on CPU time (user +
// system, wait4's rusage): on a loaded machine wall time mostly waits
// for the CPU.
func (b *bencher) ratioRows() []row {
	bin := b.bins["agent"]
	fail := func(err error) []row {
		return []row{{name: "agent: PLAIN dry run CPU / agent version CPU", unit: unitRatio, budget: budgetDryRunRatio, err: err}}
	}
	hello, err := buildHello(b.work)
	if err != nil {
		return fail(err)
	}
	m, err := b.machine(authMAC)
	if err != nil {
		return fail(err)
	}
	if _, err := runAgent(bin, m, b.env); err != nil {
		return fail(fmt.Errorf("registering the dry-run machine: %w", err))
	}
	// All four are short: twice the runs of a line, for steadier ratios.
	n := 2*b.o.runs + 1
	// bi is the same dry run with the built-in translator: the budgeted
	// run's keyfiles come from `nmstatectl gc` (the stand-in, a Go
	// process of its own, whose CPU wait4 counts in the agent's), and
	// the difference is what that one exec costs (docs/performance.md,
	// "Where a dry run's CPU goes").
	var h, v, d, bi procSeries
	for range n {
		r, err := timedExec(hello, b.env)
		if err != nil {
			return fail(err)
		}
		h.add(r)
		if r, err = timedExec(bin, b.env, "version"); err != nil {
			return fail(err)
		}
		v.add(r)
		if r, err = runAgent(bin, m, b.env, "--dry-run"); err != nil {
			return fail(err)
		}
		d.add(r)
		if r, err = runAgent(bin, m, b.env, "--dry-run", "--nmstate", "builtin"); err != nil {
			return fail(err)
		}
		bi.add(r)
	}
	cpuRatio := func(a, b procSeries) float64 { return float64(median(a.cpu)) / float64(median(b.cpu)) }
	wallRatio := func(a, b procSeries) float64 { return float64(median(a.wall)) / float64(median(b.wall)) }
	rssRatio := func(a, b procSeries) float64 { return float64(medianInt(a.rss)) / float64(medianInt(b.rss)) }
	return []row{
		h.row("hello-world Go binary (process start and exit)", "go build, stripped like the agent"),
		v.row("agent version (process start and exit)", "default build"),
		d.row("agent run: PLAIN dry run (registered machine)", "--dry-run: the conversation, the inventory and the rendering (keyfiles by the nmstatectl stand-in's gc), nothing written"),
		bi.row("agent run: PLAIN dry run, built-in translator", "the same with --nmstate builtin: no nmstatectl process"),
		{name: "agent: PLAIN dry run CPU / agent version CPU", unit: unitRatio, value: cpuRatio(d, v), budget: budgetDryRunRatio,
			note: fmt.Sprintf("medians of %d runs in turns; wall %.2f, peak RSS %.2f; built-in translator: CPU %.2f (the gc exec: %s)",
				n, wallRatio(d, v), rssRatio(d, v), cpuRatio(bi, v), format(unitDuration, float64(median(d.cpu)-median(bi.cpu))))},
		{name: "agent: agent version CPU / hello-world CPU", unit: unitRatio, value: cpuRatio(v, h), budget: budgetVersionRatio,
			note: fmt.Sprintf("wall %.2f, peak RSS %.2f; PLAIN dry run / hello-world: CPU %.2f, wall %.2f, RSS %.2f",
				wallRatio(v, h), rssRatio(v, h), cpuRatio(d, h), wallRatio(d, h), rssRatio(d, h))},
	}
}

// procSeries collects the runs of one process.
type procSeries struct {
	wall, cpu []time.Duration
	rss       []int64
}

func (s *procSeries) add(r procRun) {
	s.wall, s.cpu, s.rss = append(s.wall, r.wall), append(s.cpu, r.cpu), append(s.rss, r.maxRSS)
}

func (s *procSeries) row(name, note string) row {
	return row{name: name, unit: unitDuration, value: float64(median(s.wall)), budget: noBudget(),
		note: fmt.Sprintf("%s; CPU (user+sys) %s, peak RSS %s", note, format(unitDuration, float64(median(s.cpu))), format(unitBytes, float64(medianInt(s.rss))))}
}

func medianInt(vs []int64) int64 {
	fs := make([]float64, len(vs))
	for i, v := range vs {
		fs[i] = float64(v)
	}
	return int64(medianFloat(fs))
}

// buildHello compiles helloWorld into work, offline, with the agent's
// flags (static, stripped).
func buildHello(work string) (string, error) {
	dir := filepath.Join(work, "hello")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloWorld), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hello")
	// Built in its own directory, outside the module: a file with the
	// standard library only.
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the hello-world binary: %w\n%s", err, b)
	}
	return out, nil
}

// timedExec is one run of bin with args: its wall and CPU time and peak RSS.
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
		r.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	if err != nil {
		return r, fmt.Errorf("%s %v: %w\n%s", bin, args, err, tail(out.Bytes(), 1500))
	}
	return r, nil
}
