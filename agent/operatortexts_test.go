package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/protocol"
)

// The conflict the 50-machine storm against elemental-operator 57608bff
// met (docs/protocol.md 7.5): pkg/server/server.go's commitMachineInventory wraps
// updateMachineInventory's error, which wraps the API server's conflict
// (apimachinery's NewConflict, with the generic registry's message).
const operatorConflict = `MachineInventory update failed: failed to update machine inventory fleet-default/m-2b4c6d8e-0000-4000-8000-000000000001: ` +
	`Operation cannot be fulfilled on machineinventories.elemental.cattle.io "m-2b4c6d8e-0000-4000-8000-000000000001": ` +
	`the object has been modified; please apply your changes to the latest version and try again`

// Every text elemental-operator's registration handler can send as
// MsgError (no reason field), as its source at 57608bff builds them:
// pkg/server/api_registration.go (handleUpdate, handleGet,
// handleGetNetworkConfig, writeMachineInventoryCloudConfig),
// pkg/server/server.go (commitMachineInventory, createMachineInventory,
// updateMachineInventory) and api/v1beta1/machineregistration_types.go
// (GetClientRegistrationConfig); where it wraps a Kubernetes API error,
// with the texts apimachinery gives those errors. A conflict, a timeout
// and a "try again" are retried (75, in this process, with backoff); every
// other refusal needs a person (78) and is not retried.
func TestClassifyRegisterOperatorTexts(t *testing.T) {
	for _, c := range []struct {
		msg       string
		transient bool
	}{
		{operatorConflict, true},
		{"MachineInventory creation failed: cannot retrieve machine inventory list: " +
			"The list operation against machineinventories.elemental.cattle.io could not be completed at this time, please try again.", true},
		{"MachineInventory creation failed: failed to create machine inventory fleet-default/m-1: Too many requests, please try again later.", true},
		{"MachineInventory update failed: failed to update machine inventory fleet-default/m-1: " +
			"Timeout: request did not complete within requested timeout - context deadline exceeded", true},
		{"MachineInventory update failed: failed to update machine inventory fleet-default/m-1: " +
			"the server was unable to return a response in the time allotted, but may still be processing the request (put machineinventories.elemental.cattle.io m-1)", true},
		{"MachineInventory creation failed: failed to create machine inventory fleet-default/m-1: etcdserver: request timed out", true},
		{"NewtworkConfig not ready", true},
		{"getting machine inventory: client rate limiter Wait returned an error: context deadline exceeded", true},
		{`failed to get service account: Get "https://10.43.0.1:443/api/v1/namespaces/fleet-default/serviceaccounts/r1": dial tcp 10.43.0.1:443: i/o timeout`, true},

		{"MachineInventory not found", false},
		{"MachineInventory creation failed: machine inventory TPMHash and MachineHash are both empty", false},
		{"MachineInventory creation failed: machine inventory with TPM hash '5f3c0e' already present: fleet-default/m-1", false},
		// A name the template rendered from SMBIOS may say anything in
		// [0-9a-z.-]: it must not make a duplicate look like a timeout.
		{`MachineInventory creation failed: failed to create machine inventory fleet-default/m-timeout-timed-out: ` +
			`machineinventories.elemental.cattle.io "m-timeout-timed-out" already exists`, false},
		{`failed to get service account: serviceaccounts "r1" not found`, false},
		{"failed to get secret: <nil>", false},
		{`failed to get server-url: settings.management.cattle.io "server-url" not found`, false},
		{"server-url is not set", false},
		{"machine registration is not ready", false},
		{"registration URL is not set", false},
	} {
		got := classifyRegister(&protocol.ErrorReply{Message: c.msg})
		want := exitcode.Config
		if c.transient {
			want = exitcode.TempFail
		}
		if exitcode.Retryable(got) != c.transient || exitcode.Of(got) != want {
			t.Errorf("%q: retryable %v exit %d, want %v %d", c.msg, exitcode.Retryable(got), exitcode.Of(got), c.transient, want)
		}
		if !strings.Contains(got.Error(), c.msg) {
			t.Errorf("%q: the server's text is lost: %v", c.msg, got)
		}
	}
}

// A conflict goes to the backoff curve with its jitter (the operator sends
// no retry-after), and the next attempt registers.
func TestConflictIsRetriedWithBackoff(t *testing.T) {
	clock := retrytest.NewClock(time.Unix(0, 0))
	p := RetryPolicy(10*time.Minute, clock)
	attempts := 0
	err := p.Do(context.Background(), "registration", func(context.Context, int) error {
		attempts++
		if attempts <= 2 {
			return classifyRegister(&protocol.ErrorReply{Message: operatorConflict})
		}
		return nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("attempts %d, err %v; want the third to register", attempts, err)
	}
	waits := clock.Waits()
	if len(waits) != 2 {
		t.Fatalf("waits %v, want two", waits)
	}
	for i, w := range waits {
		base := retry.DefaultInitial << i
		lo, hi := time.Duration(float64(base)*(1-retry.DefaultJitter)), time.Duration(float64(base)*(1+retry.DefaultJitter))
		if w < lo || w > hi {
			t.Errorf("wait %d is %s, want within the jittered step [%s, %s]", i+1, w, lo, hi)
		}
	}
	var er *protocol.ErrorReply
	if last := classifyRegister(&protocol.ErrorReply{Message: operatorConflict}); !errors.As(last, &er) || exitcode.Cause(last) != "server asked to try again" {
		t.Errorf("cause %q, want the outcome line to say the server asked to try again", exitcode.Cause(last))
	}
}
