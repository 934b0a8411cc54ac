//go:build vmlab

package vm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The agent's own share of a boot (docs/proven.md): what its run
// between nodereg.service's start and READY=1 spent in the TPM, in the
// bootstrap probe and DAD, waiting for the server, applying, and in its own
// code (the rest). Phases and waits come from the agent's journal fields
// (PHASE, DURATION, the "retrying in" lines), the TPM from swtpm's stamped
// log.

var retryRe = regexp.MustCompile(`retrying in ([0-9.]+[a-zµ]+)`)

// agentRun is the split of one run.
type agentRun struct {
	total, bootstrap, waits, apply, tpmBusy time.Duration
	// Inside the bootstrap phase, from its log lines' times: link, ARP
	// probe and activation (NetworkManager's DAD) until "bootstrap address
	// up"; then until the server answered over it.
	probeUp, reach time.Duration
	phases         map[string]time.Duration
	tpmCmds        int
}

// agentShare reads the first run of nodereg.service this boot (start and
// READY=1 in guest monotonic seconds).
func (m *machine) agentShare(start, ready float64) (agentRun, error) {
	a := agentRun{total: time.Duration((ready - start) * 1e9), phases: map[string]time.Duration{}}
	out, err := m.must("journalctl -b --no-pager -o json -u nodereg.service")
	if err != nil {
		return a, err
	}
	inv := ""
	marks := map[string]int64{}
	for _, line := range strings.Split(out, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		str := func(k string) string { s, _ := e[k].(string); return s }
		if str("PHASE") == "" {
			continue
		}
		// The first run only: a restart is another invocation.
		if inv == "" {
			inv = str("_SYSTEMD_INVOCATION_ID")
		}
		if str("_SYSTEMD_INVOCATION_ID") != inv {
			continue
		}
		msg := str("MESSAGE")
		for _, k := range []string{"bringing up the bootstrap network", "bootstrap address up", "registration server reachable over the bootstrap network"} {
			if _, seen := marks[k]; !seen && strings.HasPrefix(msg, k) {
				var mono int64
				fmt.Sscan(str("__MONOTONIC_TIMESTAMP"), &mono)
				marks[k] = mono
			}
		}
		if g := retryRe.FindStringSubmatch(msg); g != nil {
			if d, err := time.ParseDuration(g[1]); err == nil {
				a.waits += d
			}
		}
		if strings.Contains(msg, "[finished]") || strings.Contains(msg, "[failed]") {
			if d, err := time.ParseDuration(str("DURATION")); err == nil {
				a.phases[str("PHASE")] += d
			}
		}
	}
	a.bootstrap, a.apply = a.phases["bootstrap"], a.phases["apply"]
	t0, t1, t2 := marks["bringing up the bootstrap network"], marks["bootstrap address up"], marks["registration server reachable over the bootstrap network"]
	if t0 > 0 && t1 > t0 {
		a.probeUp = time.Duration(t1-t0) * time.Microsecond
		if t2 > t1 {
			a.reach = time.Duration(t2-t1) * time.Microsecond
		}
	}
	a.tpmCmds, a.tpmBusy, err = m.tpmBetween(start, ready)
	return a, err
}

// own is what is left for the agent's own code: the run less the TPM, the
// bootstrap phase, the waits between attempts and the apply phase (which
// waits on NetworkManager and the reachability check).
func (a agentRun) own() time.Duration {
	return a.total - a.tpmBusy - a.bootstrap - a.waits - a.apply
}

func (a agentRun) String() string {
	r := func(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
	var ph []string
	for _, p := range []string{"config", "state", "identity", "bootstrap", "register", "fetch-network", "plan", "apply", "finish"} {
		if d, ok := a.phases[p]; ok {
			ph = append(ph, p+" "+r(d))
		}
	}
	boot := r(a.bootstrap)
	if a.probeUp > 0 {
		boot += fmt.Sprintf(" (link, ARP probe and activation with NetworkManager's DAD %s, then the server over it %s)", r(a.probeUp), r(a.reach))
	}
	return fmt.Sprintf("agent start -> READY=1 %s: TPM %d commands, %s in swtpm; bootstrap %s; waiting for the server %s; apply %s; the agent's own code and the server's replies %s (phases: %s)",
		r(a.total), a.tpmCmds, r(a.tpmBusy), boot, r(a.waits), r(a.apply), r(a.own()), strings.Join(ph, ", "))
}
