//go:build vmlab

package vm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// swtpm's log (level 20: every command it reads and every response it
// writes) carries no time, so the lab reads it through a pipe and stamps
// each line with the host's clock as it arrives. That gives the agent's TPM
// share: the commands between nodereg.service's start and READY=1, and how
// long swtpm took over them (read of a command to write of its response).

// stampTPMLog copies swtpm's log lines from r into the file at path, each
// prefixed with the host's time in ns since the epoch.
func stampTPMLog(r io.ReadCloser, path string) {
	defer r.Close()
	f, err := os.Create(path)
	if err != nil {
		_, _ = io.Copy(io.Discard, r)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fmt.Fprintf(f, "%d %s\n", time.Now().UnixNano(), sc.Text())
	}
}

// tpmEvent is one command: when swtpm read it and wrote its response.
type tpmEvent struct{ read, write int64 }

// tpmEvents are the commands of this power-on's swtpm log.
func (m *machine) tpmEvents() []tpmEvent {
	b, err := os.ReadFile(m.tpmLog)
	if err != nil {
		return nil
	}
	var ev []tpmEvent
	for _, line := range strings.Split(string(b), "\n") {
		ts, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(rest, "SWTPM_IO_Read:"):
			ev = append(ev, tpmEvent{read: ns})
		case strings.Contains(rest, "SWTPM_IO_Write:") && len(ev) > 0 && ev[len(ev)-1].write == 0:
			ev[len(ev)-1].write = ns
		}
	}
	return ev
}

// guestOffset is the host time (ns since the epoch) of the guest's
// monotonic zero: the host's clock around a read of /proc/uptime, less it.
// The guest agent's round trip (about 0.4 s) bounds its error.
func (m *machine) guestOffset() (int64, error) {
	t0 := time.Now()
	out, err := m.must("cat /proc/uptime")
	t1 := time.Now()
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/uptime: %q", out)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, err
	}
	mid := t0.UnixNano() + t1.Sub(t0).Nanoseconds()/2
	return mid - int64(up*1e9), nil
}

// tpmBetween counts the commands swtpm read between the guest's monotonic
// times g0 and g1 (seconds) and the time it spent on them.
func (m *machine) tpmBetween(g0, g1 float64) (int, time.Duration, error) {
	off, err := m.guestOffset()
	if err != nil {
		return 0, 0, err
	}
	h0, h1 := off+int64(g0*1e9), off+int64(g1*1e9)
	var n int
	var busy int64
	for _, e := range m.tpmEvents() {
		if e.read < h0 || e.read > h1 {
			continue
		}
		n++
		if e.write > e.read {
			busy += e.write - e.read
		}
	}
	return n, time.Duration(busy), nil
}
