package responses

import "github.com/superstep/superstep/responses/wire"

// Input item types the server accepts. The items are read by the one
// reader of create requests, package wire, which recovery and
// input_items use too.
const (
	itemMessage            = wire.InputMessage
	itemFunctionCallOutput = wire.InputFunctionCallOutput
)
