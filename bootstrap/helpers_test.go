package bootstrap

import "github.com/nodereg/nodereg/protocol"

func rawString(s string) protocol.RawValue { return protocol.RawValue{Value: s} }
