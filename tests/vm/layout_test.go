//go:build vmlab

package vm

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The lab checks its own model at every boot (docs/vmlab.md, "The lab
// checks its own model"): a case whose machine does not boot into the
// layout it claims fails, rather than proving something on another layout.

const keyfileDir = "/etc/NetworkManager/system-connections"

// mountUsage is what klibc's mount prints when it cannot parse its command
// line: the initramfs' layout script then did not mount what it should.
var mountUsage = regexp.MustCompile(`Usage: mount `)

// checkLayout checks the boot the machine is in: /etc, /oem, the mode
// sentinels, the keyfiles when the initramfs stage started, and the serial
// log of this power-on.
func (m *machine) checkLayout() error {
	if err := m.serialClean(); err != nil {
		return err
	}
	if err := m.checkEtc(); err != nil {
		return err
	}
	if err := m.checkOEM(); err != nil {
		return err
	}
	if err := m.checkSentinels(); err != nil {
		return err
	}
	start, err := m.probe("yip-start")
	if err != nil {
		return err
	}
	if !m.keepEtc && len(start.keyfiles) > 0 {
		return fmt.Errorf("layout: keyfiles existed when the initramfs stage started, with an ephemeral /etc there must be none: %v", start.names())
	}
	return nil
}

// serialClean fails when a serial log of the machine holds a mount usage
// error.
func (m *machine) serialClean() error {
	for _, s := range m.serials {
		b, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		if loc := mountUsage.FindIndex(b); loc != nil {
			end := min(len(b), loc[1]+120)
			return fmt.Errorf("layout: %s holds a mount usage error (the initramfs' layout script failed): %q", s, b[loc[0]:end])
		}
	}
	return nil
}

// checkEtc: an overlay whose upper layer is a tmpfs, or (vmlab.etc=keep)
// the root filesystem itself.
func (m *machine) checkEtc() error {
	out, err := m.must("findmnt -n -o FSTYPE,OPTIONS --mountpoint /etc || echo none; stat -f -c %T /run/elemental/overlay/etc/upper 2>/dev/null || echo none")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if m.keepEtc {
		if lines[0] != "none" {
			return fmt.Errorf("layout: /etc is to stay on the root (vmlab.etc=keep) but is a mount of its own: %q", out)
		}
		return nil
	}
	f := strings.Fields(lines[0])
	if len(lines) != 2 || len(f) != 2 || f[0] != "overlay" || !strings.Contains(f[1], "upperdir=/run/elemental/overlay/etc/upper") || lines[1] != "tmpfs" {
		return fmt.Errorf("layout: want /etc an overlay with its upper layer on a tmpfs under /run/elemental/overlay; got %q", out)
	}
	return nil
}

// checkOEM: /oem is the machine's second disk, ext4 labelled OEM, another
// filesystem than the root.
func (m *machine) checkOEM() error {
	out, err := m.must("findmnt -n -o SOURCE,FSTYPE --mountpoint /oem; findmnt -n -o SOURCE --mountpoint /; e2label /dev/vdb")
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	if len(f) != 4 || f[0] != "/dev/vdb" || f[1] != "ext4" || f[2] != "/dev/vda" || f[3] != "OEM" {
		return fmt.Errorf("layout: want /oem on /dev/vdb (ext4, label OEM) and / on /dev/vda; got %q", out)
	}
	return nil
}

// checkSentinels: exactly the asked-for mode's sentinel, content 1, under
// /run/elemental and /run/cos.
func (m *machine) checkSentinels() error {
	for _, dir := range []string{"/run/elemental", "/run/cos"} {
		out, err := m.must("cd " + dir + " && for f in *_mode; do [ -e \"$f\" ] && echo \"$f $(cat \"$f\")\"; done; true")
		if err != nil {
			return err
		}
		if got, want := strings.TrimSpace(out), m.mode+"_mode 1"; got != want {
			return fmt.Errorf("layout: sentinels under %s: want only %q, got %q", dir, want, got)
		}
	}
	return nil
}

// probeRecord is what tests/vm/image/probe wrote at one point of the
// initramfs stage: its stamp's change time and every keyfile's.
type probeRecord struct {
	stamp    int64 // ns since the epoch
	keyfiles map[string]int64
}

func (p probeRecord) names() []string {
	var n []string
	for k := range p.keyfiles {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// probe reads /run/vmlab/<point> of this boot, waiting for it: the stage
// runs before sysinit.target, the guest agent after it, so it is there
// unless the stage did not run.
func (m *machine) probe(point string) (probeRecord, error) {
	var out string
	err := waitFor("the initramfs stage's record /run/vmlab/"+point, commandBound, func() (bool, string) {
		r, err := m.run("cat /run/vmlab/" + point)
		out = r.Stdout
		return err == nil && r.Code == 0, fmt.Sprint(r, err)
	})
	if err != nil {
		return probeRecord{}, err
	}
	return parseProbe(out)
}

func parseProbe(out string) (probeRecord, error) {
	p := probeRecord{keyfiles: map[string]int64{}}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "stamp":
			p.stamp = nsOf(f[1])
		case len(f) == 3 && f[0] == "keyfile":
			p.keyfiles[f[2]] = nsOf(f[1])
		default:
			return p, fmt.Errorf("probe record: line %q", line)
		}
	}
	if p.stamp <= 0 {
		return p, fmt.Errorf("probe record without a stamp: %q", out)
	}
	return p, nil
}

// checkKeyfilesFromYip proves, after a reboot, that every keyfile
// NetworkManager loaded from /etc was written by this boot's initramfs
// stage: its change time lies between the stage's start and end stamps,
// and it has not changed since (so what NetworkManager read at its start
// is that file). It returns the keyfiles' names.
func (m *machine) checkKeyfilesFromYip() ([]string, error) {
	start, err := m.probe("yip-start")
	if err != nil {
		return nil, err
	}
	end, err := m.probe("yip-end")
	if err != nil {
		return nil, err
	}
	var loaded []string
	err = waitFor("NetworkManager to list the profiles it loaded", bootBound, func() (bool, string) {
		r, err := m.run("nmcli -t -f FILENAME connection show")
		if err != nil || r.Code != 0 {
			return false, fmt.Sprint(r, err)
		}
		loaded = nil
		for _, f := range strings.Fields(r.Stdout) {
			if strings.HasPrefix(f, keyfileDir+"/") {
				loaded = append(loaded, f)
			}
		}
		return len(loaded) > 0, r.Stdout
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(loaded)
	now, err := m.must("stat -c '%.9Z %n' " + strings.Join(loaded, " "))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(now), "\n") {
		f := strings.Fields(line)
		ct := nsOf(f[0])
		at, ok := end.keyfiles[f[1]]
		switch {
		case !ok:
			return nil, fmt.Errorf("layout: NetworkManager loaded %s, which was not there when the initramfs stage ended", f[1])
		case at < start.stamp || at > end.stamp:
			return nil, fmt.Errorf("layout: %s changed at %d ns, outside the initramfs stage (%d-%d): not written by this boot's stage", f[1], at, start.stamp, end.stamp)
		case ct != at:
			return nil, fmt.Errorf("layout: %s changed again at %d ns after the stage wrote it (%d)", f[1], ct, at)
		}
	}
	return loaded, nil
}

// yipWindow is the stage's record as printed in a timeline: how long it
// ran and how many keyfiles it left.
func (m *machine) yipWindow() string {
	start, err := m.probe("yip-start")
	if err != nil {
		return ""
	}
	end, err := m.probe("yip-end")
	if err != nil {
		return ""
	}
	return fmt.Sprintf("initramfs stage wrote %d keyfiles in %s", len(end.keyfiles)-len(start.keyfiles),
		time.Duration(end.stamp-start.stamp).Round(time.Millisecond))
}

// nsOf parses stat's "%.9Z" (seconds with nine decimals) into ns; -1 when
// it is not that.
func nsOf(s string) int64 {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) != 9 {
		return -1
	}
	v, err := strconv.ParseInt(sec+frac, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// noMinuteLost: this boot did not wait for NetworkManager-wait-online. The
// agent's units no longer want network-online.target (docs/boot-timeline.md,
// "No wait for a DHCP that cannot come") and nothing else in the lab's
// image does, so neither the target nor the wait is in the boot at all,
// also with NICs no profile claims.
func (m *machine) noMinuteLost() error {
	for _, u := range []string{"network-online.target", "NetworkManager-wait-online.service"} {
		kv, err := m.unit(u, "ActiveState", "InactiveExitTimestampMonotonic")
		if err != nil {
			return err
		}
		if kv["ActiveState"] != "inactive" || kv["InactiveExitTimestampMonotonic"] != "0" {
			return fmt.Errorf("%s ran this boot (%v): something still waits for network-online.target", u, kv)
		}
	}
	return nil
}
