// Package logging builds the agent's logger: text for a console (colour
// only on a terminal and never with NO_COLOR), JSON for collectors, and
// native journald entries with structured fields when stderr is the
// journal (systemd sets JOURNAL_STREAM).
package logging

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/termsafe"
)

// Formats accepted by --log-format.
const (
	FormatText    = "text"
	FormatJSON    = "json"
	FormatJournal = "journal"
)

// SourceField names the library a line comes from; lines from ghw carry
// source=ghw and are shown only with --debug=all.
const (
	SourceField = "source"
	SourceGHW   = "ghw"
)

// Debug is the value of --debug: off, on (the agent's own debug lines) or
// all (the libraries' too). It parses as a bool so upstream's `-d` and
// `--debug=true` keep working.
type Debug int

const (
	DebugOff Debug = iota
	DebugOn
	DebugAll
)

func (d *Debug) String() string {
	switch *d {
	case DebugOn:
		return "true"
	case DebugAll:
		return "all"
	}
	return "false"
}

// Set accepts true/false (and 1/0, t/f) or all.
func (d *Debug) Set(v string) error {
	switch strings.ToLower(v) {
	case "", "true", "t", "1", "yes", "on":
		*d = DebugOn
	case "false", "f", "0", "no", "off":
		*d = DebugOff
	case "all":
		*d = DebugAll
	default:
		return fmt.Errorf("%q is not true, false or all", v)
	}
	return nil
}

// Type makes --debug print like a bool in help.
func (d *Debug) Type() string { return "bool" }

// Options choose the logger.
type Options struct {
	// Format: text, json or journal; "" picks journal when stderr is the
	// journal stream, else text.
	Format string
	Debug  Debug
	// Out is where text and JSON go (stderr).
	Out io.Writer
	// Getenv reads NO_COLOR, INVOCATION_ID and JOURNAL_STREAM; default
	// os.Getenv.
	Getenv func(string) string
	// IsJournal reports whether Out is connected to the journal; default
	// journal.StderrIsJournalStream.
	IsJournal func() bool
	// Send writes one journal entry; default journal.Send. Tests record.
	Send func(msg string, p journal.Priority, vars map[string]string) error
	// IsTerminal reports whether Out is a terminal (colour only there);
	// default: a character device that answers the terminal ioctl.
	IsTerminal func(io.Writer) bool
	// Identifier is SYSLOG_IDENTIFIER in the journal; default the program
	// name.
	Identifier string
}

// New returns the logger. It fails only on an unknown format.
func New(o Options) (*logrus.Entry, error) {
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.IsJournal == nil {
		o.IsJournal = func() bool { ok, _ := journal.StderrIsJournalStream(); return ok }
	}
	if o.Send == nil {
		o.Send = journal.Send
	}
	if o.IsTerminal == nil {
		o.IsTerminal = isTerminal
	}
	if o.Identifier == "" {
		o.Identifier = filepath.Base(os.Args[0])
	}
	format := o.Format
	if format == "" {
		format = FormatText
		if o.Getenv("JOURNAL_STREAM") != "" && o.IsJournal() {
			format = FormatJournal
		}
	}
	// Under systemd the journal stamps every line already.
	underSystemd := o.Getenv("INVOCATION_ID") != "" || o.Getenv("JOURNAL_STREAM") != ""
	// https://no-color.org: set and not empty means no colour.
	colour := o.Getenv("NO_COLOR") == "" && o.IsTerminal(o.Out)
	text := &logrus.TextFormatter{
		FullTimestamp:    true,
		DisableTimestamp: underSystemd,
		ForceColors:      colour,
		DisableColors:    !colour,
	}
	var f logrus.Formatter
	switch format {
	case FormatText:
		f = text
	case FormatJSON:
		f = &logrus.JSONFormatter{}
	case FormatJournal:
		text.ForceColors, text.DisableColors = false, true
		f = &journalFormatter{send: o.Send, fallback: text, identifier: o.Identifier}
	default:
		return nil, fmt.Errorf("log format %q: want text or json", o.Format)
	}
	l := logrus.New()
	l.Out = o.Out
	l.Formatter = &filtered{inner: f, showLibraries: o.Debug == DebugAll, escapeMessage: f == logrus.Formatter(text) && colour}
	if o.Debug != DebugOff {
		l.Level = logrus.DebugLevel
	}
	return logrus.NewEntry(l), nil
}

// filtered drops the libraries' own lines unless --debug=all.
type filtered struct {
	inner         logrus.Formatter
	showLibraries bool
	// escapeMessage: the text formatter in colour prints the message raw
	// (without colour it quotes it, and json escapes it).
	escapeMessage bool
}

func (f *filtered) Format(e *logrus.Entry) ([]byte, error) {
	if src, _ := e.Data[SourceField].(string); src == SourceGHW && !f.showLibraries {
		return nil, nil
	}
	// A message may quote a server or a resource. Escaped here, the
	// colours the formatter adds stay.
	if f.escapeMessage {
		if safe := termsafe.Text(e.Message); safe != e.Message {
			c := *e
			c.Message = safe
			return f.inner.Format(&c)
		}
	}
	return f.inner.Format(e)
}

// journalFormatter sends each entry to the journal with its fields and
// writes nothing to stderr; if the journal cannot be reached the line goes
// to stderr as text, so nothing is lost.
type journalFormatter struct {
	send       func(string, journal.Priority, map[string]string) error
	fallback   logrus.Formatter
	identifier string
}

func (j *journalFormatter) Format(e *logrus.Entry) ([]byte, error) {
	vars := map[string]string{"SYSLOG_IDENTIFIER": j.identifier}
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if name := FieldName(k); name != "" {
			vars[name] = fmt.Sprint(e.Data[k])
		}
	}
	msg := e.Message
	if err, ok := e.Data[logrus.ErrorKey]; ok {
		msg += ": " + fmt.Sprint(err)
	}
	if err := j.send(msg, priority(e.Level), vars); err != nil {
		return j.fallback.Format(e)
	}
	return nil, nil
}

// FieldName turns a logrus field (phase, tpm-hash, address.eth0) into a
// journal field name (PHASE, TPM_HASH, ADDRESS_ETH0): upper case letters,
// digits and underscores, not starting with an underscore (those are
// journald's own). "" when nothing is left.
func FieldName(k string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(k) {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.TrimLeft(b.String(), "_0123456789")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

func priority(l logrus.Level) journal.Priority {
	switch l {
	case logrus.PanicLevel:
		return journal.PriEmerg
	case logrus.FatalLevel:
		return journal.PriCrit
	case logrus.ErrorLevel:
		return journal.PriErr
	case logrus.WarnLevel:
		return journal.PriWarning
	case logrus.InfoLevel:
		return journal.PriInfo
	}
	return journal.PriDebug
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
