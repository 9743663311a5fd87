package responses

import (
	"errors"
	"fmt"
	"strings"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
)

// Limits of the metadata field, as OpenAI documents them.
const (
	MetadataMaxKeys     = protocol.MetadataMaxKeys
	MetadataMaxKeyLen   = protocol.MetadataMaxKeyLen
	MetadataMaxValueLen = protocol.MetadataMaxValueLen
)

// MaxInputItemsDefault is the default cap on the number of input items of
// a create request (Options.MaxInputItems). We found no documented OpenAI
// cap; this one is superstep's, so that one request cannot make every later
// read of it (recovery, input_items) expensive.
const MaxInputItemsDefault = 10_000

// Error codes of request validation.
const (
	codeInvalidJSON   = protocol.CodeInvalidJSON
	codeInvalidType   = protocol.CodeInvalidType
	codeInvalidValue  = protocol.CodeInvalidValue
	codeMissingParam  = protocol.CodeMissingParam
	codeUnsupportedIn = protocol.CodeUnsupportedValue
)

// parseCreate parses the body of POST /v1/responses into CreateParams with
// the one reader of create requests (protocol.ParseCreate), which recovery and
// input_items use too. Unknown fields are tolerated; a known field of the
// wrong type, a duplicate key, a case variant of a known key or more than
// maxInputItems input items (when > 0) is a 400 naming the field. The
// returned params keep body as Request.
func parseCreate(body []byte, maxInputItems int) (*host.CreateParams, error) {
	req, err := protocol.ParseCreate(body, maxInputItems)
	if err != nil {
		return nil, requestError(err)
	}
	return &host.CreateParams{Request: body, Model: req.Model, Input: req.Input, Parsed: req, Instructions: req.Instructions,
		Metadata: req.Metadata, Stream: req.Stream, Background: req.Background, Store: req.Store,
		PreviousResponseID: req.PreviousResponseID, Conversation: req.Conversation}, nil
}

// requestError is the 400 of a request the wire reader refuses.
func requestError(err error) error {
	if re, ok := errors.AsType[*protocol.RequestError](err); ok {
		return badRequest(re.Param, re.Code, "%s", re.Message)
	}
	return fmt.Errorf("responses: parse request: %w", err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", strings.ToValidUTF8(s[:n], ""))
}
