package agent

import (
	"testing"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/protocol"
)

func TestDecideNetwork(t *testing.T) {
	real := &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNmstate}
	none := &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNone}
	for _, c := range []struct {
		name  string
		mode  string
		reply protocol.Reply
		want  networkDecision
	}{
		{"upstream server, embedded config", localconfig.NetworkAuto, protocol.Reply{Network: real},
			networkDecision{First: sourceReply, Retry: sourceReRegister}},
		{"upstream server, no config", localconfig.NetworkAuto, protocol.Reply{},
			networkDecision{First: sourceNone, Retry: sourceNone}},
		{"upstream server, configurator none", localconfig.NetworkAuto, protocol.Reply{Network: none},
			networkDecision{First: sourceNone, Retry: sourceNone}},
		{"announced explicit, config embedded", localconfig.NetworkAuto, protocol.Reply{Network: real, ExplicitNetworkConfig: true},
			networkDecision{First: sourceReply, Retry: sourceExplicit, UnresolvedIsFinal: true}},
		{"announced explicit, nothing embedded (pending)", localconfig.NetworkAuto, protocol.Reply{ExplicitNetworkConfig: true},
			networkDecision{First: sourceExplicit, Retry: sourceExplicit, UnresolvedIsFinal: true}},
		{"forced explicit, not announced (seed PR): placeholders pending", localconfig.NetworkExplicit, protocol.Reply{},
			networkDecision{First: sourceExplicit, Retry: sourceExplicit}},
		{"forced explicit, config embedded, not announced (HEAD): re-register", localconfig.NetworkExplicit, protocol.Reply{Network: real},
			networkDecision{First: sourceReply, Retry: sourceReRegister}},
		{"forced explicit, announced", localconfig.NetworkExplicit, protocol.Reply{Network: real, ExplicitNetworkConfig: true},
			networkDecision{First: sourceReply, Retry: sourceExplicit, UnresolvedIsFinal: true}},
		{"forced embedded, announced: re-register, placeholders final", localconfig.NetworkEmbedded, protocol.Reply{Network: real, ExplicitNetworkConfig: true},
			networkDecision{First: sourceReply, Retry: sourceReRegister, UnresolvedIsFinal: true}},
		{"forced embedded, announced, nothing embedded", localconfig.NetworkEmbedded, protocol.Reply{ExplicitNetworkConfig: true},
			networkDecision{First: sourceNone, Retry: sourceNone}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := decideNetwork(c.mode, &c.reply); got != c.want {
				t.Errorf("decideNetwork(%s, %+v) = %+v, want %+v", c.mode, c.reply, got, c.want)
			}
		})
	}
}
