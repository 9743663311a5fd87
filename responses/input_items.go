package responses

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/responses/wire"
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
	items, err := storedInputItems(id, resp.Request)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("responses: input items of %s: %w", id, err))
		return
	}
	list, err := pageItems(items, q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// storedInputItems rebuilds the input items of a stored create request,
// read by the one reader of create requests.
func storedInputItems(responseID string, request []byte) ([]inputItem, error) {
	input, err := wire.ReadInput(request)
	if err != nil {
		return nil, err
	}
	suffix := strings.TrimPrefix(responseID, "resp_")
	items := make([]inputItem, 0, len(input))
	for i, in := range input {
		items = append(items, toInputItem(in, fmt.Sprintf("%s_%04d", suffix, i)))
	}
	return items, nil
}

func toInputItem(in host.InputItem, idSuffix string) inputItem {
	if in.Type == itemFunctionCallOutput {
		out := in.Output
		return inputItem{ID: "fco_" + idSuffix, Type: in.Type, Status: "completed", CallID: in.CallID, Output: &out}
	}
	part := contentPart{Type: "input_text", Text: in.Text}
	if in.Role == "assistant" {
		part = contentPart{Type: "output_text", Text: in.Text, Annotations: []any{}}
	}
	return inputItem{ID: "msg_" + idSuffix, Type: itemMessage, Status: "completed", Role: in.Role, Content: []contentPart{part}}
}

// pageItems orders items and cuts the page after `after` / before
// `before` (both item ids, in the listing order), at most limit long.
func pageItems(items []inputItem, q listQuery) (inputItemList, error) {
	if q.desc {
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	lo, hi := 0, len(items)
	if q.after != "" {
		i := slices.IndexFunc(items, func(it inputItem) bool { return it.ID == q.after })
		if i < 0 {
			return inputItemList{}, badRequest("after", codeInvalidValue, "Invalid value for 'after': no input item with id '%s'.", truncate(q.after, 100))
		}
		lo = i + 1
	}
	if q.before != "" {
		i := slices.IndexFunc(items, func(it inputItem) bool { return it.ID == q.before })
		if i < 0 {
			return inputItemList{}, badRequest("before", codeInvalidValue, "Invalid value for 'before': no input item with id '%s'.", truncate(q.before, 100))
		}
		hi = i
	}
	page := inputItemList{Object: "list", Data: []inputItem{}}
	if lo < hi {
		page.Data = items[lo:min(hi, lo+q.limit)]
		page.HasMore = lo+q.limit < hi
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	return page, nil
}
