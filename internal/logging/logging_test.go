package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/logging"
)

type sent struct {
	msg  string
	pri  journal.Priority
	vars map[string]string
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func newLog(t *testing.T, o logging.Options) *logrus.Entry {
	t.Helper()
	l, err := logging.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestColourOnlyOnATerminalWithoutNoColor(t *testing.T) {
	tty := func(io.Writer) bool { return true }
	for _, c := range []struct {
		noColor string
		want    bool
	}{{"", true}, {"1", false}} {
		var out bytes.Buffer
		newLog(t, logging.Options{Out: &out, Getenv: env("NO_COLOR", c.noColor), IsTerminal: tty}).Warn("x")
		if got := strings.Contains(out.String(), "\x1b["); got != c.want {
			t.Errorf("NO_COLOR=%q: colour %v, want %v: %q", c.noColor, got, c.want, out.String())
		}
	}
}

func TestJSONIsOneObjectPerLine(t *testing.T) {
	var out bytes.Buffer
	log := newLog(t, logging.Options{Format: "json", Out: &out, Getenv: env()})
	log.WithField("phase", "register").Info("registered")
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", out.String(), err)
	}
	if m["phase"] != "register" || m["msg"] != "registered" || m["level"] != "info" {
		t.Fatalf("fields %v", m)
	}
}

func TestUnknownFormatIsRefused(t *testing.T) {
	if _, err := logging.New(logging.Options{Format: "xml", Out: io.Discard}); err == nil {
		t.Fatal("xml accepted")
	}
}

func TestJournalGetsStructuredFieldsAndPriority(t *testing.T) {
	var got []sent
	var out bytes.Buffer
	log := newLog(t, logging.Options{
		Out: &out, Getenv: env("JOURNAL_STREAM", "8:1234"), IsJournal: func() bool { return true },
		Identifier: "nodereg-agent",
		Send: func(msg string, p journal.Priority, vars map[string]string) error {
			got = append(got, sent{msg, p, vars})
			return nil
		},
	})
	log.WithField("phase", "network-config").WithField("tpm-hash", "abc").WithField("address.eth0", "10.0.0.5/24").Info("addresses")
	log.WithField("phase", "register").WithError(errors.New("boom")).Error("failed")
	if out.Len() != 0 {
		t.Errorf("stderr got %q under the journal", out.String())
	}
	if len(got) != 2 {
		t.Fatalf("%d journal entries, want 2", len(got))
	}
	v := got[0].vars
	if got[0].pri != journal.PriInfo || v["PHASE"] != "network-config" || v["TPM_HASH"] != "abc" || v["ADDRESS_ETH0"] != "10.0.0.5/24" || v["SYSLOG_IDENTIFIER"] != "nodereg-agent" {
		t.Errorf("entry 1: %+v", got[0])
	}
	if got[1].pri != journal.PriErr || got[1].msg != "failed: boom" || got[1].vars["ERROR"] != "boom" {
		t.Errorf("entry 2: %+v", got[1])
	}
}

func TestJournalStreamOfAnotherFileIsText(t *testing.T) {
	var out bytes.Buffer
	sentAny := false
	log := newLog(t, logging.Options{
		Out: &out, Getenv: env("JOURNAL_STREAM", "8:1234"), IsJournal: func() bool { return false },
		Send: func(string, journal.Priority, map[string]string) error { sentAny = true; return nil },
	})
	log.Info("hello")
	if sentAny || !strings.Contains(out.String(), "hello") {
		t.Fatalf("journal used for a redirected stderr: sent=%v out=%q", sentAny, out.String())
	}
}

func TestJournalUnreachableFallsBackToStderr(t *testing.T) {
	var out bytes.Buffer
	log := newLog(t, logging.Options{
		Format: "journal", Out: &out, Getenv: env(),
		Send: func(string, journal.Priority, map[string]string) error { return errors.New("no socket") },
	})
	log.Warn("kept")
	if !strings.Contains(out.String(), "kept") {
		t.Fatalf("line lost: %q", out.String())
	}
}

func TestGHWLinesOnlyWithDebugAll(t *testing.T) {
	for _, c := range []struct {
		debug string
		own   bool
		ghw   bool
	}{{"false", false, false}, {"true", true, false}, {"all", true, true}} {
		var d logging.Debug
		if err := d.Set(c.debug); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		log := newLog(t, logging.Options{Out: &out, Getenv: env(), Debug: d})
		log.Debug("own debug line")
		log.WithField(logging.SourceField, logging.SourceGHW).Debug("ghw says hi")
		if got := strings.Contains(out.String(), "own debug line"); got != c.own {
			t.Errorf("--debug=%s: own line shown %v", c.debug, got)
		}
		if got := strings.Contains(out.String(), "ghw says hi"); got != c.ghw {
			t.Errorf("--debug=%s: ghw line shown %v", c.debug, got)
		}
	}
}

func TestDebugValue(t *testing.T) {
	var d logging.Debug
	if err := d.Set("loud"); err == nil {
		t.Fatal("loud accepted")
	}
}

func TestFieldName(t *testing.T) {
	for in, want := range map[string]string{"phase": "PHASE", "tpm-hash": "TPM_HASH", "address.eth0": "ADDRESS_ETH0", "_x": "X", "": ""} {
		if got := logging.FieldName(in); got != want {
			t.Errorf("FieldName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A message quoting a server or a resource cannot act on the terminal: on
// a terminal the text formatter prints the message raw (only without
// colour does it quote it), so the logger escapes it; its own colours stay
// (docs/reliability.md).
func TestMessageControlCharactersEscapedOnATerminal(t *testing.T) {
	tty := func(io.Writer) bool { return true }
	for _, isTTY := range []bool{true, false} {
		var out bytes.Buffer
		o := logging.Options{Out: &out, Getenv: env()}
		if isTTY {
			o.IsTerminal = tty
		}
		newLog(t, o).Warn("server said: \x1b]0;owned\a\x1b[2J done")
		got := out.String()
		if strings.Contains(got, "\x1b]") || strings.Contains(got, "\x1b[2J") || strings.Contains(got, "\a") {
			t.Errorf("terminal %v: a raw control sequence reached the output: %q", isTTY, got)
		}
		if !strings.Contains(got, `\x1b]0;owned`) {
			t.Errorf("terminal %v: the message is not there escaped: %q", isTTY, got)
		}
		if isTTY && !strings.Contains(got, "\x1b[33m") {
			t.Errorf("the logger's own colour is lost: %q", got)
		}
	}
}
