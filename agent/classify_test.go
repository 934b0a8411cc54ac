package agent

import (
	"errors"
	"testing"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/protocol"
)

// classifyRegister follows the exit-code table, and the one retry decision
// (exitcode.Retryable) follows the class it gives: what needs a person
// stops the retries with 78; an exhausted pool stops them with 75; the rest
// is retried.
func TestClassifyRegisterFollowsTheTable(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		final bool // not retried in this process
		code  int
	}{
		{"inventory deleted", &protocol.ErrorReply{Message: "MachineInventory not found"}, true, 78},
		{"refused on purpose", &protocol.ErrorReply{Message: "failed to create inventory"}, true, 78},
		{"pool exhausted", &protocol.ErrorReply{Reason: protocol.ReasonPoolExhausted, Message: "pool-a"}, true, 75},
		{"waiting for addresses", &protocol.ErrorReply{Reason: protocol.ReasonWaitingForIPAddress}, false, 75},
		{"404 on the upgrade", &protocol.StepError{Step: protocol.StepDial, Err: &protocol.HandshakeError{StatusCode: 404, Status: "404 Not Found", Err: errors.New("bad handshake")}}, true, 78},
		{"503 on the upgrade", &protocol.HandshakeError{StatusCode: 503, Status: "503", Err: errors.New("bad handshake")}, false, 75},
		{"connection refused", errors.New("connection refused"), false, 75},
	} {
		got := classifyRegister(c.err)
		if final := !exitcode.Retryable(got); final != c.final || exitcode.Of(got) != c.code {
			t.Errorf("%s: final %v exit %d, want %v %d", c.name, final, exitcode.Of(got), c.final, c.code)
		}
	}
}
