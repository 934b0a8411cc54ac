package agent

// The run's retry decisions: the one decision is exitcode.Retryable, by the
// error's class (transient is retried; final, configuration and usage are
// not), which agent/retry is handed. What only the run knows (which reply
// means a deleted inventory, when an unresolved placeholder is final, that
// an exhausted pool is not worth another attempt in this process) is said
// here by giving the error its class, never by a mark of its own.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/protocol"
)

// classifyRegister classes a registration failure, adding what the operator
// should do; nil stays nil.
func classifyRegister(err error) error {
	if err == nil {
		return nil
	}
	var er *protocol.ErrorReply
	isReply := errors.As(err, &er)
	if isReply && (er.Reason == protocol.ReasonInventoryNotFound || strings.Contains(er.Message, "MachineInventory not found")) {
		return &errclass.ConfigError{Err: fmt.Errorf("the server has no inventory for this machine any more: re-provisioning needed (run `nodereg-agent --reset` from recovery): %w", err)}
	}
	if isReply && exitcode.Of(err) == exitcode.Config {
		if why := operatorTransient(er.Message); why != "" {
			return errclass.Wrap(errclass.Transient, "server asked to try again",
				fmt.Errorf("the server could not complete the registration this time (%s): %w", why, err))
		}
		// Any other MsgError that is not about pending addresses is the
		// server refusing on purpose (a duplicate hash, a name that
		// already exists, a template error): asking again gives the same
		// answer (its class says so).
		return fmt.Errorf("the server refused the registration: %w", err)
	}
	return markNotUpYet(classifyNetwork(err, false))
}

// classifyRender: an unresolved placeholder is a pending claim (transient)
// unless the decision made it final; any other render error is the
// config's fault (exit 78).
func classifyRender(err error, unresolvedIsFinal bool) error {
	var ue *apply.UnresolvedError
	switch {
	case errors.As(err, &ue) && unresolvedIsFinal:
		return &errclass.ConfigError{Err: fmt.Errorf("the server's network template uses a placeholder no address pool provides: %w", err)}
	case errors.As(err, &ue):
		return fmt.Errorf("addresses not ready yet: %w", err)
	}
	return &errclass.ConfigError{Err: err}
}

// classifyNetwork: pending addresses are retried (honouring the server's
// retry-after); an exhausted pool or a failed claim ends the run with the
// server's reason, final in this process and retried later by systemd
// (exit 75). unannounced: the question was MsgNetworkConfig to a server
// that never announced it (network-config: explicit); one that drops the
// connection on it is a released operator, which no retry changes
// (docs/protocol.md §7.4).
func classifyNetwork(err error, unannounced bool) error {
	if unannounced && errors.Is(err, protocol.ErrNetworkConfigDropped) {
		return &errclass.ConfigError{Err: fmt.Errorf("network-config is explicit, but this server never announced the explicit exchange "+
			"and closed the connection on MsgNetworkConfig: a released elemental-operator, which gives the network config only inside MsgConfig; "+
			"set elemental.registration.network-config to auto (the default), which asks only servers that announce it: %w", err)}
	}
	var er *protocol.ErrorReply
	if errors.As(err, &er) {
		switch er.Reason {
		case protocol.ReasonPoolExhausted, protocol.ReasonAllocationFailed:
			return errclass.Wrap(errclass.Final, er.Cause(), err)
		}
	}
	return err
}

// operatorTransient names what makes a plain MsgError text (one without a
// reason) worth another attempt, "" when nothing does. elemental-operator
// sends the Kubernetes API's error text as its message: its handler has no
// reason field (docs/protocol.md §7.5, "Texts without a reason"). What a
// later attempt can succeed with is an optimistic-concurrency conflict (the
// inventory was changed by a controller between read and write), a timeout
// (of the API server, etcd, or the operator's own 10 s wait for the network
// config) and a text that asks for another attempt. The phrases hold spaces
// or capitals, which a sanitised inventory name (lower-case, [0-9a-z.-])
// never does, so no name or hash in the message can make a final refusal
// look transient.
func operatorTransient(msg string) string {
	for _, t := range transientTexts {
		if strings.Contains(msg, t.phrase) {
			return t.why
		}
	}
	return ""
}

// transientTexts: the first matching phrase names the reason.
var transientTexts = []struct{ phrase, why string }{
	// apimachinery's conflict (HTTP 409, reason Conflict), the message of
	// the API server's generic registry when resourceVersion is stale.
	{"the object has been modified; please apply your changes to the latest version and try again", "Kubernetes conflict: the inventory changed under the server's write"},
	// ServerTimeout ("... could not be completed at this time, please
	// try again."), TooManyRequests ("... please try again later") and
	// any server that says so in words.
	{"try again", "the server asks to try again"},
	// Timeouts: NewTimeoutError ("Timeout: ..."), the API server's
	// request timeout, etcd's, a client's context or socket deadline.
	{"Timeout: ", "timeout"},
	{"the server was unable to return a response in the time allotted", "timeout"},
	{"timed out", "timeout"},
	{"deadline exceeded", "timeout"},
	{"i/o timeout", "timeout"},
	// The operator's handleGetNetworkConfig when its 10 s wait for the
	// IPAM claims ran out (its spelling).
	{"NewtworkConfig not ready", "timeout: the server's network config was not ready in time"},
}
