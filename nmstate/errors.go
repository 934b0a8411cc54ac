package nmstate

import (
	"errors"
	"fmt"
)

// Error kinds. The first three are nmstate's own ErrorKind names, used where
// nmstate refuses the same input; KindUnsupported marks input nmstate may
// accept but this translator does not cover (or that NetworkManager would
// not load), so a caller can fall back to the real nmstatectl.
const (
	KindInvalidArgument = "InvalidArgument"
	KindNotImplemented  = "NotImplementedError"
	KindNotSupported    = "NotSupportedError"
	KindUnsupported     = "Unsupported"
)

// ErrUnsupported matches (errors.Is) every *Error of KindUnsupported.
var ErrUnsupported = errors.New("outside the subset of nmstate this translator covers")

// Error is a refusal: Path names the key in the desired state
// (e.g. "interfaces[0].ipv4.address[1].prefix-length").
type Error struct {
	Path   string
	Kind   string
	Reason string
}

// unsupportedHint tells the operator where an Unsupported input can go:
// nmstate itself may take it (docs/nmstate.md, "Outside the subset").
const unsupportedHint = " (outside the built-in translator's subset, see docs/nmstate.md; nmstatectl gc may accept it: install nmstatectl and use --nmstate=nmstatectl)"

func (e *Error) Error() string {
	hint := ""
	if e.Kind == KindUnsupported {
		hint = unsupportedHint
	}
	if e.Path == "" {
		return fmt.Sprintf("nmstate: %s: %s%s", e.Kind, e.Reason, hint)
	}
	return fmt.Sprintf("nmstate: %s: %s: %s%s", e.Path, e.Kind, e.Reason, hint)
}

// Unwrap lets errors.Is(err, ErrUnsupported) pick out the refusals that
// are ours rather than nmstate's.
func (e *Error) Unwrap() error {
	if e.Kind == KindUnsupported {
		return ErrUnsupported
	}
	return nil
}

func invalid(path, format string, a ...any) *Error {
	return &Error{Path: path, Kind: KindInvalidArgument, Reason: fmt.Sprintf(format, a...)}
}

func unsupported(path, format string, a ...any) *Error {
	return &Error{Path: path, Kind: KindUnsupported, Reason: fmt.Sprintf(format, a...)}
}
