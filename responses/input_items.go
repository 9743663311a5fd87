package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
)

// Paging of input_items.
const (
	inputItemsLimitDefault = 20
	inputItemsLimitMax     = 100
)

// inputItem is one entry of GET /v1/responses/{id}/input_items.
type inputItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Status  string        `json:"status"`
	Role    string        `json:"role,omitempty"`
	Content []contentPart `json:"content,omitempty"`
	CallID  string        `json:"call_id,omitempty"`
	Output  *string       `json:"output,omitempty"`
	// Name and Arguments are a function_call's or an mcp_call's (with its
	// ServerLabel); Summary a reasoning item's (empty: its content is not
	// kept).
	Name        string  `json:"name,omitempty"`
	Arguments   *string `json:"arguments,omitempty"`
	Summary     []any   `json:"summary,omitempty"`
	ServerLabel string  `json:"server_label,omitempty"`
}

type contentPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations,omitempty"`
}

type inputItemList struct {
	Object  string      `json:"object"`
	Data    []inputItem `json:"data"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
	HasMore bool        `json:"has_more"`
}

// listQuery are the paging parameters of input_items.
type listQuery struct {
	after, before string
	limit         int
	desc          bool
}

func parseListQuery(r *http.Request) (listQuery, error) {
	vals := r.URL.Query()
	q := listQuery{after: vals.Get("after"), before: vals.Get("before"), limit: inputItemsLimitDefault, desc: true}
	if v := vals.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > inputItemsLimitMax {
			return q, badRequest("limit", codeInvalidValue, "Invalid value for 'limit': expected an integer from 1 to %d, got '%s'.",
				inputItemsLimitMax, truncate(v, 64))
		}
		q.limit = n
	}
	switch v := vals.Get("order"); v {
	case "", "desc":
	case "asc":
		q.desc = false
	default:
		return q, badRequest("order", codeInvalidValue, "Invalid value for 'order': expected 'asc' or 'desc', got '%s'.", truncate(v, 64))
	}
	return q, nil
}

// handleInputItems serves GET /v1/responses/{id}/input_items: the input
// items of the stored create request, with ids that are stable across
// calls, newest first unless order=asc, paged by after/before and limit.
func (s *server) handleInputItems(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q, err := parseListQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.host.Get(r.Context(), id, ownerFrom(r.Context()))
	if err != nil {
		s.writeError(w, r, mapNotFound(err, id))
		return
	}
	list, err := inputItemsPage(id, resp.Request, resp.Input, q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// inputItemsPage returns one page of the input items of the stored create
// request of response responseID. The request is walked twice by the one
// reader of create requests (protocol.ScanInput): once to count its items,
// once to parse only the items of the page and the cursors; the others are
// skipped without being decoded, so a call holds the page, not the
// request's items. Item ids hold the item's index, so a cursor is found
// without a search.
//
// An item_reference is listed as the item it was resolved to at create,
// read from resolved (the response's recorded input, store.Response.Input,
// one item per item of the request): the type, content and id prefix of
// that item, under this response's own input item id. The API's input item
// list has no item_reference type, and the SDKs decode it by the types it
// has.
func inputItemsPage(responseID string, request, resolved []byte, q listQuery) (inputItemList, error) {
	suffix := strings.TrimPrefix(responseID, "resp_")
	var (
		page          = inputItemList{Object: "list", Data: []inputItem{}}
		n, lo, end    int // item count; the page's positions in the listing order
		after, before = -1, -1
		cursorErr     error
	)
	// pos maps an item's index to its position in the listing order and
	// back (reversing is its own inverse).
	pos := func(i int) int {
		if q.desc {
			return n - 1 - i
		}
		return i
	}
	inPage := func(i int) bool { p := pos(i); return p >= lo && p < end }
	// plan places the page once the number of items is known.
	plan := func(count int) func(int) bool {
		n = count
		hi := n
		if q.after != "" {
			if after = cursorIndex(q.after, suffix, n); after < 0 {
				cursorErr = badCursor("after", q.after)
				return nil
			}
			lo = pos(after) + 1
		}
		if q.before != "" {
			if before = cursorIndex(q.before, suffix, n); before < 0 {
				cursorErr = badCursor("before", q.before)
				return nil
			}
			hi = pos(before)
		}
		end = lo
		if lo < hi {
			end = min(hi, lo+q.limit)
			page.Data = make([]inputItem, end-lo)
			page.HasMore = end < hi
		}
		return func(i int) bool { return inPage(i) || i == after || i == before }
	}
	afterOK, beforeOK := false, false
	refs := recordedItems{raw: resolved}
	_, err := protocol.ScanInput(request, plan, func(i int, in host.InputItem) error {
		if in.Type == protocol.InputItemReference {
			var err error
			if in, err = refs.at(i); err != nil {
				return err
			}
		}
		id := inputItemID(in, suffix, i)
		if inPage(i) {
			page.Data[pos(i)-lo] = toInputItem(in, id)
		}
		afterOK = afterOK || i == after && id == q.after
		beforeOK = beforeOK || i == before && id == q.before
		return nil
	})
	switch {
	case err != nil:
		return inputItemList{}, fmt.Errorf("responses: input items of %s: %w", responseID, err)
	case cursorErr != nil:
		return inputItemList{}, cursorErr
	case after >= 0 && !afterOK:
		return inputItemList{}, badCursor("after", q.after)
	case before >= 0 && !beforeOK:
		return inputItemList{}, badCursor("before", q.before)
	}
	if k := len(page.Data); k > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[k-1].ID
	}
	return page, nil
}

func badCursor(param, id string) error {
	return badRequest(param, codeInvalidValue, "Invalid value for '%s': no input item with id '%s'.", param, truncate(id, 100))
}

// inputItemID is the stable id of the input item at index i of the
// request of the response whose id ends in suffix.
func inputItemID(in host.InputItem, suffix string, i int) string {
	return fmt.Sprintf("%s%s_%04d", itemPrefix[in.Type], suffix, i)
}

// itemPrefix is the id prefix of each input item type.
var itemPrefix = map[string]string{itemMessage: "msg_", itemFunctionCallOutput: "fco_",
	protocol.InputFunctionCall: "fc_", protocol.InputReasoning: "rs_", protocol.InputToolCall: "mcp_"}

// cursorIndex returns the index an input item id names, or -1 when id is
// not the id of an item among n of the response with suffix. The item's
// type, which the prefix names, is checked against the item itself.
func cursorIndex(id, suffix string, n int) int {
	var rest string
	ok := false
	for _, p := range itemPrefix {
		if rest, ok = strings.CutPrefix(id, p); ok {
			break
		}
	}
	if !ok {
		return -1
	}
	digits, ok := strings.CutPrefix(rest, suffix+"_")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || i >= n || fmt.Sprintf("%04d", i) != digits {
		return -1
	}
	return i
}

func toInputItem(in host.InputItem, id string) inputItem {
	switch in.Type {
	case itemFunctionCallOutput:
		out := in.Output
		return inputItem{ID: id, Type: in.Type, Status: "completed", CallID: in.CallID, Output: &out}
	case protocol.InputFunctionCall:
		args := in.Arguments
		return inputItem{ID: id, Type: in.Type, Status: "completed", CallID: in.CallID, Name: in.Name, Arguments: &args}
	case protocol.InputToolCall:
		args, out := in.Arguments, in.Output
		return inputItem{ID: id, Type: in.Type, Status: "completed", ServerLabel: protocol.ToolServerLabel, Name: in.Name,
			Arguments: &args, Output: &out}
	case protocol.InputReasoning:
		return inputItem{ID: id, Type: in.Type, Status: "completed", Summary: []any{}}
	}
	part := contentPart{Type: "input_text", Text: in.Text}
	if in.Role == "assistant" {
		part = contentPart{Type: "output_text", Text: in.Text, Annotations: []any{}}
	}
	return inputItem{ID: id, Type: itemMessage, Status: "completed", Role: in.Role, Content: []contentPart{part}}
}

// recordedItems reads items of a response's recorded input (a JSON array of
// input items), asked for in increasing index order: one pass, decoding
// only the items asked for.
type recordedItems struct {
	raw  []byte
	dec  *json.Decoder
	next int // index of the next element dec reads
}

// at returns the recorded item at index i, which must be an item the host
// resolved (not a reference): i is greater than any index asked before.
func (r *recordedItems) at(i int) (host.InputItem, error) {
	bad := func(why string) (host.InputItem, error) {
		return host.InputItem{}, fmt.Errorf("responses: the recorded input item %d: %s", i, why)
	}
	if r.dec == nil {
		if len(r.raw) == 0 {
			return bad("the response has no recorded input")
		}
		r.dec = json.NewDecoder(bytes.NewReader(r.raw))
		if t, err := r.dec.Token(); err != nil || t != json.Delim('[') {
			return bad("the recorded input is not an array")
		}
	}
	for ; r.next < i; r.next++ {
		var skip struct{}
		if !r.dec.More() {
			return bad("missing")
		}
		if err := r.dec.Decode(&skip); err != nil {
			return bad(err.Error())
		}
	}
	if r.next > i || !r.dec.More() {
		return bad("missing")
	}
	var it host.InputItem
	if err := r.dec.Decode(&it); err != nil {
		return bad(err.Error())
	}
	r.next++
	if _, known := itemPrefix[it.Type]; !known {
		return bad(fmt.Sprintf("type %q", it.Type))
	}
	return it, nil
}
