//go:build vmlab

package vm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Guest-side checks and figures shared by the cases.

// waitUnitRun waits until unit's main process has run and exited since the
// given monotonic time (seconds since boot; 0: any time this boot), and
// returns its properties.
func (m *machine) waitUnitRun(unit string, since float64) (map[string]string, error) {
	props := []string{"Type", "ActiveState", "SubState", "Result", "ExecMainStatus", "ExecMainCode",
		"InactiveExitTimestampMonotonic", "ActiveEnterTimestampMonotonic",
		"ExecMainStartTimestampMonotonic", "ExecMainExitTimestampMonotonic", "NRestarts", "StatusText"}
	var kv map[string]string
	err := waitFor(unit+" in "+m.name+" to run to its end", unitBound, func() (bool, string) {
		var err error
		kv, err = m.unit(unit, props...)
		if err != nil {
			return false, err.Error()
		}
		exit := usec(kv["ExecMainExitTimestampMonotonic"])
		return exit > 0 && exit > since, fmt.Sprintf("%s/%s status %s: %q", kv["ActiveState"], kv["SubState"], kv["ExecMainStatus"], kv["StatusText"])
	})
	return kv, err
}

// firstBoot powers m on and waits for its first boot and nodereg.service's
// first run, as every case begins: it returns the unit's properties, how
// long after power-on the run was seen and the TPM commands until then.
func (m *machine) firstBoot(t *testing.T) (kv map[string]string, seen time.Duration, tpmCmds int) {
	t.Helper()
	if err := m.start("active"); err != nil {
		fail(t, m, "power on", err)
	}
	if err := m.waitUp(); err != nil {
		fail(t, m, "first boot", err)
	}
	kv, err := m.waitUnitRun("nodereg.service", 0)
	if err != nil {
		fail(t, m, "nodereg.service's first run", err)
	}
	return kv, time.Since(m.powerOn), m.tpmCommands()
}

// addrs lists the global addresses on dev, without prefix length
// (family "-4" or "-6").
func (m *machine) addrs(family, dev string) ([]string, error) {
	out, err := m.must("ip -o " + family + " addr show dev " + dev + " scope global")
	if err != nil {
		return nil, err
	}
	var list []string
	for _, f := range strings.Fields(out) {
		if strings.Contains(f, "/") && (strings.Count(f, ".") == 3 || strings.Contains(f, ":")) {
			list = append(list, f)
		}
	}
	return list, nil
}

// waitAddr waits until dev carries addr/plen.
func (m *machine) waitAddr(dev, cidr string) error {
	fam := "-4"
	if strings.Contains(cidr, ":") {
		fam = "-6"
	}
	return waitFor(cidr+" on "+m.name+"'s "+dev, bootBound, func() (bool, string) {
		got, err := m.addrs(fam, dev)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range got {
			if a == cidr {
				return true, ""
			}
		}
		return false, fmt.Sprint(got)
	})
}

// oemDigest is a checksum of every file under /oem, by path.
func (m *machine) oemDigest() (string, error) {
	return m.must("cd /oem && find . -path ./lost+found -prune -o -type f -print | LC_ALL=C sort | xargs -r sha256sum")
}

// oemDigestBut is oemDigest without one file (a path relative to /oem).
func (m *machine) oemDigestBut(rel string) (string, error) {
	return m.must("cd /oem && find . -path ./lost+found -prune -o -type f ! -path ./" + rel + " -print | LC_ALL=C sort | xargs -r sha256sum")
}

// stateKey is one top-level key of the agent's state file under /oem.
func (m *machine) stateKey(key string) (string, error) {
	out, err := m.must("cat /oem/registration/state.yaml")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`), nil
		}
	}
	return "", nil
}

// journalFirst is the monotonic time (s) of the first journal line of this
// boot matching pattern (an extended regexp) in the output of journalctl
// args, or -1.
func (m *machine) journalFirst(args, pattern string) (float64, string, error) {
	out, err := m.must("journalctl -b --no-pager -o short-monotonic " + args)
	if err != nil {
		return -1, "", err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return -1, "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if !re.MatchString(line) {
			continue
		}
		// "[   12.345678] host ident[pid]: message"
		if i := strings.Index(line, "]"); strings.HasPrefix(line, "[") && i > 0 {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[1:i]), 64)
			if err == nil {
				return v, line, nil
			}
		}
	}
	return -1, "", nil
}

// addrTime is when addr/plen first appeared on dev this boot, in seconds
// since the kernel started, from the lab's address monitor
// (addrwatch.service, `ip -o -ts monitor address`). The time is ip's own
// stamp of the netlink event, turned into the monotonic clock with the
// journal entry's pair of clocks, so a journald that reads the pipe late
// under load does not move it.
func (m *machine) addrTime(dev, cidr string) (float64, error) {
	out, err := m.must("journalctl -b --no-pager -o json -u addrwatch.service")
	if err != nil {
		return -1, err
	}
	re := regexp.MustCompile(`^\[([0-9T:.-]+)\] [0-9]+: ` + regexp.QuoteMeta(dev) + ` +inet6? ` + regexp.QuoteMeta(cidr) + ` `)
	for _, line := range strings.Split(out, "\n") {
		var e struct {
			Msg  any    `json:"MESSAGE"`
			RT   string `json:"__REALTIME_TIMESTAMP"`
			Mono string `json:"__MONOTONIC_TIMESTAMP"`
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		msg, _ := e.Msg.(string)
		g := re.FindStringSubmatch(msg)
		if g == nil {
			continue
		}
		ts, err := time.ParseInLocation("2006-01-02T15:04:05.999999", g[1], time.UTC)
		if err != nil {
			return -1, fmt.Errorf("address monitor stamp %q: %w", g[1], err)
		}
		rt, _ := strconv.ParseInt(e.RT, 10, 64)
		mono, _ := strconv.ParseInt(e.Mono, 10, 64)
		return float64(ts.UnixMicro()-(rt-mono)) / 1e6, nil
	}
	return -1, nil
}

// timeline prints the boot's figures from the guest's own clock (journal
// and systemd, seconds since the kernel started) and the host's.
func (m *machine) timeline(label, dev, cidr string, hostSeen time.Duration, tpmCmds int) string {
	var b strings.Builder
	share := ""
	fmt.Fprintf(&b, "vmlab: timeline %s:", label)
	at, _ := m.addrTime(dev, cidr)
	nm, _ := m.unit("NetworkManager.service", "ExecMainStartTimestampMonotonic")
	nr, _ := m.unit("nodereg.service", "InactiveExitTimestampMonotonic", "ActiveEnterTimestampMonotonic", "ExecMainStatus")
	ys, _ := m.unit("elemental-setup-initramfs.service", "InactiveExitTimestampMonotonic", "ActiveEnterTimestampMonotonic")
	nmStart := usec(nm["ExecMainStartTimestampMonotonic"])
	fmt.Fprintf(&b, " kernel start -> %s on %s %.1fs", cidr, dev, at)
	if at > 0 && nmStart > 0 {
		fmt.Fprintf(&b, "; NetworkManager start (%.1fs) -> address %.1fs", nmStart, at-nmStart)
	}
	if y0, y1 := usec(ys["InactiveExitTimestampMonotonic"]), usec(ys["ActiveEnterTimestampMonotonic"]); y1 > 0 {
		fmt.Fprintf(&b, "; initramfs stage (yip) %.1fs-%.1fs", y0, y1)
		if w := m.yipWindow(); w != "" {
			fmt.Fprintf(&b, " (%s)", w)
		}
	}
	// The first start of this boot (a restart moves InactiveExit on).
	s, _, _ := m.journalFirst("-u nodereg.service", `Starting nodereg\.service`)
	if s <= 0 {
		s = usec(nr["InactiveExitTimestampMonotonic"])
	}
	if r := usec(nr["ActiveEnterTimestampMonotonic"]); s > 0 {
		if r > 0 {
			fmt.Fprintf(&b, "; nodereg.service start (%.1fs) -> READY=1 %.1fs", s, r-s)
			if a, err := m.agentShare(s, r); err == nil {
				share = "\n    " + a.String()
			}
		} else {
			fmt.Fprintf(&b, "; nodereg.service start (%.1fs), no READY=1 (exit %s)", s, nr["ExecMainStatus"])
		}
	}
	if hostSeen > 0 {
		fmt.Fprintf(&b, "; power-on (host clock) -> seen by the lab %.1fs", hostSeen.Seconds())
	}
	if tpmCmds >= 0 {
		fmt.Fprintf(&b, "; TPM commands this boot until the agent was done %d", tpmCmds)
	}
	b.WriteString(share)
	if out, err := m.must("systemd-analyze 2>/dev/null | head -1"); err == nil {
		fmt.Fprintf(&b, "\n    %s", strings.TrimSpace(out))
	}
	if out, err := m.must("systemd-analyze blame --no-pager 2>/dev/null"); err == nil {
		var total, agent float64
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			d := blameSeconds(f[:len(f)-1])
			total += d
			unit := f[len(f)-1]
			if strings.HasPrefix(unit, "nodereg") {
				agent += d
			}
			if strings.HasPrefix(unit, "nodereg") || strings.HasPrefix(unit, "NetworkManager") || strings.HasPrefix(unit, "elemental-setup") {
				fmt.Fprintf(&b, "\n    blame: %s", strings.TrimSpace(l))
			}
		}
		if total > 0 {
			fmt.Fprintf(&b, "\n    the agent's share of systemd-analyze blame: %.1fs of %.1fs (%.0f%%)", agent, total, 100*agent/total)
		}
	}
	return b.String()
}

// blameSeconds parses systemd's duration words ("1min", "8.551s", "186ms").
func blameSeconds(words []string) float64 {
	var sum float64
	for _, w := range words {
		for _, u := range []struct {
			suffix string
			scale  float64
		}{{"min", 60}, {"ms", 1e-3}, {"us", 1e-6}, {"µs", 1e-6}, {"h", 3600}, {"s", 1}} {
			if v, ok := strings.CutSuffix(w, u.suffix); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					sum += f * u.scale
					break
				}
			}
		}
	}
	return sum
}

// journalField is the value of FIELD= in the verbose journal of unit this
// boot (the agent's native journal fields, docs/cli.md, "Logs").
func (m *machine) journalField(unit, field string) (string, error) {
	out, err := m.must("journalctl -b --no-pager -o verbose -u " + unit + " | sed -n 's/^ *" + field + "=//p' | tail -1")
	return strings.TrimSpace(out), err
}
