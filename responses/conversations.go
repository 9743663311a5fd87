package responses

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
)

// The Conversations API: /v1/conversations[/{id}[/items[/{item_id}]]], as
// OpenAI documents it. A conversation is visible to the owner (API key)
// that created it only: another owner's is a 404, as an unknown one.
// host/conversation.go says what a turn (POST /v1/responses with
// conversation) does with it.

// Paging of conversation items (as OpenAI documents it).
const (
	conversationItemsLimitDefault = 20
	conversationItemsLimitMax     = 100
)

func (s *server) conversationRoutes(api func(string, http.HandlerFunc)) {
	api("POST /v1/conversations", s.withStoreTimeout(s.handleConversationCreate))
	api("GET /v1/conversations/{id}", s.withStoreTimeout(s.handleConversationGet))
	api("POST /v1/conversations/{id}", s.withStoreTimeout(s.handleConversationUpdate))
	api("DELETE /v1/conversations/{id}", s.withStoreTimeout(s.handleConversationDelete))
	api("POST /v1/conversations/{id}/items", s.withStoreTimeout(s.handleConversationItemsAdd))
	api("GET /v1/conversations/{id}/items", s.withStoreTimeout(s.handleConversationItems))
	api("GET /v1/conversations/{id}/items/{item_id}", s.withStoreTimeout(s.handleConversationItem))
	api("DELETE /v1/conversations/{id}/items/{item_id}", s.withStoreTimeout(s.handleConversationItemDelete))
}

type conversationBody struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

func toConversationBody(c *host.Conversation) conversationBody {
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return conversationBody{ID: c.ID, Object: "conversation", CreatedAt: c.CreatedAt.Unix(), Metadata: md}
}

type conversationItemList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

func toItemList(items []host.ConversationItem, more bool) conversationItemList {
	l := conversationItemList{Object: "list", Data: make([]json.RawMessage, len(items)), HasMore: more}
	for i, it := range items {
		l.Data[i] = it.JSON
	}
	if len(items) > 0 {
		l.FirstID, l.LastID = &items[0].ID, &items[len(items)-1].ID
	}
	return l
}

// readConversationBody reads and parses a write's body.
func (s *server) readConversationBody(w http.ResponseWriter, r *http.Request, kind string) (*protocol.ConversationRequest, error) {
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	req, err := protocol.ParseConversationRequest(body, kind, host.ConversationItemsMax)
	if err != nil {
		return nil, requestError(err)
	}
	return req, nil
}

func (s *server) handleConversationCreate(w http.ResponseWriter, r *http.Request) {
	req, err := s.readConversationBody(w, r, protocol.ConversationCreateBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, _, err := s.host.ConversationCreate(r.Context(), ownerFrom(r.Context()), req.Metadata, req.Items)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toConversationBody(c))
}

func (s *server) handleConversationGet(w http.ResponseWriter, r *http.Request) {
	c, err := s.host.ConversationGet(r.Context(), r.PathValue("id"), ownerFrom(r.Context()))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toConversationBody(c))
}

func (s *server) handleConversationUpdate(w http.ResponseWriter, r *http.Request) {
	req, err := s.readConversationBody(w, r, protocol.ConversationUpdateBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.host.ConversationUpdate(r.Context(), r.PathValue("id"), ownerFrom(r.Context()), req.Metadata)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toConversationBody(c))
}

func (s *server) handleConversationDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.host.ConversationDelete(r.Context(), id, ownerFrom(r.Context())); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deletedBody{ID: id, Object: "conversation.deleted", Deleted: true})
}

func (s *server) handleConversationItemsAdd(w http.ResponseWriter, r *http.Request) {
	req, err := s.readConversationBody(w, r, protocol.ConversationItemsBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, err := s.host.ConversationItemsAdd(r.Context(), r.PathValue("id"), ownerFrom(r.Context()), req.Items)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toItemList(items, false))
}

// parseItemsQuery reads after, limit and order of an items list.
func parseItemsQuery(r *http.Request) (*host.ConversationItemsParams, error) {
	vals := r.URL.Query()
	p := &host.ConversationItemsParams{After: vals.Get("after"), Limit: conversationItemsLimitDefault, Desc: true}
	if v := vals.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > conversationItemsLimitMax {
			return nil, badRequest("limit", codeInvalidValue, "Invalid value for 'limit': expected an integer from 1 to %d, got '%s'.",
				conversationItemsLimitMax, truncate(v, 64))
		}
		p.Limit = n
	}
	switch v := vals.Get("order"); v {
	case "", "desc":
	case "asc":
		p.Desc = false
	default:
		return nil, badRequest("order", codeInvalidValue, "Invalid value for 'order': expected 'asc' or 'desc', got '%s'.", truncate(v, 64))
	}
	return p, nil
}

func (s *server) handleConversationItems(w http.ResponseWriter, r *http.Request) {
	q, err := parseItemsQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, more, err := s.host.ConversationItems(r.Context(), r.PathValue("id"), ownerFrom(r.Context()), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toItemList(items, more))
}

func (s *server) handleConversationItem(w http.ResponseWriter, r *http.Request) {
	it, err := s.host.ConversationItem(r.Context(), r.PathValue("id"), ownerFrom(r.Context()), r.PathValue("item_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeRawJSON(w, http.StatusOK, it.JSON)
}

func (s *server) handleConversationItemDelete(w http.ResponseWriter, r *http.Request) {
	c, err := s.host.ConversationItemDelete(r.Context(), r.PathValue("id"), ownerFrom(r.Context()), r.PathValue("item_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toConversationBody(c))
}

// notFoundError is the 404 of a host.NotFoundError.
func notFoundError(e *host.NotFoundError) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found", Param: e.Param,
		Message: e.Message}
}
