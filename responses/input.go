package responses

import "github.com/superstep/superstep/protocol"

// Input item types the server accepts. The items are read by the one
// reader of create requests, package protocol, which recovery and
// input_items use too.
const (
	itemMessage            = protocol.InputMessage
	itemFunctionCallOutput = protocol.InputFunctionCallOutput
)
