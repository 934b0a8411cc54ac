// Package errclass lets an error say what kind of failure it is, so the
// package that makes the error decides, and agent/exitcode only maps a
// class to an exit status (docs/cli.md, "Exit codes"). A leaf: the standard
// library only, so any package may import it.
package errclass

import (
	"errors"
	"fmt"
)

// Class is what a failure asks of whoever runs the agent.
type Class int

const (
	// Transient: another attempt may succeed, in this process or after a
	// restart (exit 75). The class of an error that declares none.
	Transient Class = iota
	// Final: try again later (exit 75), but not in this process: another
	// attempt now would meet the same answer (an exhausted pool, a host
	// name DNS does not know), so systemd's restart tries again.
	Final
	// Config: only a change of configuration, local or on the server, can
	// fix it (exit 78); retrying gives the same answer.
	Config
	// Usage: the command line is wrong (exit 64).
	Usage
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Final:
		return "final"
	case Config:
		return "config"
	case Usage:
		return "usage"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Classed is an error that declares its class.
type Classed interface {
	error
	Class() Class
}

// Of is the class of the first error in err's chain that declares one
// (errors.As order: the outermost first); ok is false when none does.
func Of(err error) (c Class, ok bool) {
	var cl Classed
	if errors.As(err, &cl) {
		return cl.Class(), true
	}
	return Transient, false
}

// Causer is a classed error that also names its cause for the outcome
// line ("server refused the upgrade", "network policy", ...).
type Causer interface {
	Cause() string
}

// CauseOf is the cause named by the first error in err's chain that
// declares a class, if it names one; "" otherwise.
func CauseOf(err error) string {
	var cl Classed
	if !errors.As(err, &cl) {
		return ""
	}
	if c, ok := cl.(Causer); ok {
		return c.Cause()
	}
	return ""
}

// Is reports whether err's chain declares class c (Of's answer).
func Is(err error, c Class) bool {
	got, ok := Of(err)
	return ok && got == c
}

// Error is an error with a class given where it is made, for an error of
// another package or a library that declares none.
type Error struct {
	C    Class
	Name string // the cause, "" for none
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
func (e *Error) Class() Class  { return e.C }
func (e *Error) Cause() string { return e.Name }

// Wrap gives err the class c and the cause name; nil stays nil.
func Wrap(c Class, name string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{C: c, Name: name, Err: err}
}

// ConfigError is a failure only a change of configuration (local or on the
// server) can fix: retrying would give the same answer.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
func (e *ConfigError) Class() Class  { return Config }
func (e *ConfigError) Cause() string { return "configuration" }

// Configf returns a ConfigError.
func Configf(format string, a ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, a...)}
}

// Sentinel is a sentinel error (compared with errors.Is) that declares its
// class.
type Sentinel struct {
	C    Class
	Name string // the cause, "" for none
	Msg  string
}

func (e *Sentinel) Error() string { return e.Msg }
func (e *Sentinel) Class() Class  { return e.C }
func (e *Sentinel) Cause() string { return e.Name }

// New returns a sentinel of class c with the cause name.
func New(c Class, name, msg string) error { return &Sentinel{C: c, Name: name, Msg: msg} }
