package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
)

// stormRows runs a storm of each size in both source-address modes. Each
// row names the storm; its histogram of retries is printed after the
// table (stormHistograms).
func (b *bencher) stormRows() []row {
	return b.storms(stormModes, b.o.stormN)
}

// conflictStormRows is the conflict storm at the first storm size: 1,000
// machines, 300 in -short (group "conflict").
func (b *bencher) conflictStormRows() []row {
	return b.storms([]stormMode{conflictStorm}, b.o.stormN[:1])
}

// storms runs a storm of each size in each mode.
func (b *bencher) storms(modes []stormMode, sizes []int) []row {
	p, err := loadPayloads()
	if err != nil {
		return []row{{name: "reboot storm", budget: noBudget(), err: err}}
	}
	var ids atomic.Int64
	ids.Store(1 << 28) // apart from the load bursts' machines
	var rows []row
	run := func(n int, mode stormMode) {
		name := fmt.Sprintf("storm: %d machines, %s", n, mode.name)
		res, err := b.storm(p, n, mode, &ids)
		if err == nil {
			err = res.failures()
		}
		if err == nil && mode.conflict > 0 {
			err = res.conflictsMet()
		}
		if res == nil {
			res = &stormResult{}
		}
		rows = append(rows, res.rows(name, err)...)
		if mode.conflict > 0 {
			rows = append(rows, res.conflictRows(name, err)...)
		}
		if err == nil {
			b.histograms = append(b.histograms, res.histogram(name))
		}
	}
	for _, n := range sizes {
		for _, mode := range modes {
			run(n, mode)
		}
	}
	return rows
}

// conflictsMet is an error when the fault never fired: a storm that met
// no conflict proves nothing about how the agent takes one.
func (r *stormResult) conflictsMet() error {
	if r.count("Kubernetes conflict") == 0 {
		return fmt.Errorf("no machine met the injected conflict (regserver --fault-update-conflict)")
	}
	return nil
}

// count is the number of attempts refused with kind.
func (r *stormResult) count(kind string) int {
	n := 0
	for _, m := range r.machines {
		for _, a := range m.attempts {
			if a.kind == kind {
				n++
			}
		}
	}
	return n
}

// conflictRows: how many machines registered, how many ended at 78 (the
// conflict taken as needing a person; docs/protocol.md 7.5), and the conflicts met.
func (r *stormResult) conflictRows(name string, err error) []row {
	registered, exit78 := 0, 0
	for _, m := range r.machines {
		switch {
		case m.err == nil:
			registered++
		case exitcode.Of(m.err) == exitcode.Config:
			exit78++
		}
	}
	return []row{
		{name: name + ": registered", unit: unitCount, value: float64(registered), budget: noBudget(), err: err,
			note: fmt.Sprintf("of %d machines; %d ended with exit 78; %d attempts refused with the conflict", len(r.machines), exit78, r.count("Kubernetes conflict"))},
	}
}

// failures is an error naming the machines that gave up: none may, within
// the agent's deadline.
func (r *stormResult) failures() error {
	var failed []string
	exit78 := 0
	for i, m := range r.machines {
		if m.err != nil {
			failed = append(failed, fmt.Sprintf("machine %d after %d attempts: %v", i, len(m.attempts), m.err))
			if exitcode.Of(m.err) == exitcode.Config {
				exit78++
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d machines gave up, %d of them with exit 78; first: %s", len(failed), len(r.machines), exit78, failed[0])
}

func (r *stormResult) rows(name string, err error) []row {
	var lat, waits []time.Duration
	var all time.Duration
	var attempts []float64
	refusals := map[string]int{}
	for _, m := range r.machines {
		lat = append(lat, m.done-m.on)
		all = max(all, m.done)
		attempts = append(attempts, float64(len(m.attempts)))
		waits = append(waits, m.waits...)
		for _, a := range m.attempts {
			if a.kind != "ok" {
				refusals[shortKind(a.kind)]++
			}
		}
	}
	meanAttempts, maxAttempts := 0.0, 0.0
	for _, a := range attempts {
		meanAttempts += a / float64(len(attempts))
		maxAttempts = max(maxAttempts, a)
	}
	// The most frequent refusals first; a tail of rare ones is counted.
	kinds := slices.SortedFunc(maps.Keys(refusals), func(a, b string) int { return cmp.Or(refusals[b]-refusals[a], strings.Compare(a, b)) })
	var refused []string
	for i, k := range kinds {
		if i == 4 {
			refused = append(refused, fmt.Sprintf("%d more kinds", len(kinds)-4))
			break
		}
		refused = append(refused, fmt.Sprintf("%s %d", k, refusals[k]))
	}
	if len(refused) == 0 {
		refused = []string{"none"}
	}
	rssErr := err
	if rssErr == nil {
		rssErr = r.rssErr
	}
	spread := "no retries"
	if len(waits) > 0 {
		spread = fmt.Sprintf("%d waits: p10 %s, p90 %s, min %s, max %s (the agent's ±20%% jitter; histogram below the table)",
			len(waits), format(unitDuration, float64(percentile(waits, 10))), format(unitDuration, float64(percentile(waits, 90))),
			format(unitDuration, float64(percentile(waits, 0))), format(unitDuration, float64(percentile(waits, 100))))
	}
	return []row{
		{name: name + ": all registered", unit: unitDuration, value: float64(all), budget: noBudget(), err: err,
			note: fmt.Sprintf("from the first power-on; powered on within 1 s, regserver's default limits, agent deadline %s", stormDeadline)},
		{name: name + ": registration p50", unit: unitDuration, value: float64(percentile(lat, 50)), budget: noBudget(), err: err, note: "power-on to registered, retries included"},
		{name: name + ": registration p99", unit: unitDuration, value: float64(percentile(lat, 99)), budget: noBudget(), err: err},
		{name: name + ": attempts per machine", unit: unitRatio, value: meanAttempts, budget: noBudget(), err: err,
			note: fmt.Sprintf("mean; max %.0f; refused: %s", maxAttempts, strings.Join(refused, ", "))},
		{name: name + ": regserver peak RSS", unit: unitBytes, value: r.rss, budget: noBudget(), err: rssErr, note: "VmHWM"},
		{name: name + ": retry wait p50", unit: unitDuration, value: float64(percentile(waits, 50)), budget: noBudget(), err: err, note: spread},
	}
}

// shortKind keeps the table's note short: the first unclassified error
// stands for all of them.
func shortKind(kind string) string {
	if len(kind) > 60 {
		return kind[:60] + "…"
	}
	return kind
}

// histogram is when the retries (attempts after a machine's first)
// started, in at most histBins bins from the storm's start.
func (r *stormResult) histogram(name string) string {
	var at []time.Duration
	var end time.Duration
	for _, m := range r.machines {
		for _, a := range m.attempts[min(1, len(m.attempts)):] {
			at = append(at, a.at)
		}
		end = max(end, m.done)
	}
	if len(at) == 0 {
		return name + ": no retries"
	}
	const histBins = 24
	width := max(100*time.Millisecond, (end/histBins).Round(100*time.Millisecond)+100*time.Millisecond)
	counts := make([]int, int(end/width)+1)
	for _, t := range at {
		counts[int(t/width)]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d retries, started per %.1f s bin (bin start: count):\n ", name, len(at), width.Seconds())
	for i, c := range counts {
		fmt.Fprintf(&b, " %.1fs:%d", (time.Duration(i) * width).Seconds(), c)
	}
	return b.String()
}

// printHistograms writes the storms' retry histograms after the table.
func printHistograms(w io.Writer, hs []string) {
	if len(hs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nreboot storms: retries over time (a machine's first attempt is not a retry)")
	for _, h := range hs {
		fmt.Fprintln(w, h)
	}
}
