package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// Conversations (the Conversations API). A conversation is an ordered list
// of items kept by the store (store.ConversationStore). A create naming
// one (CreateParams.Conversation) is a turn of it:
//
//   - its context is the conversation's items followed by the request's
//     input, run as stateless replay of those items would be: for an agent
//     model the history it sees, for a workflow model a new run whose
//     input messages they are (the simplest rule that is the same for
//     every model);
//   - it holds the conversation from its create to its terminal commit:
//     another turn meanwhile is refused with the error OpenAI gives (400
//     conversation_locked) and stores nothing;
//   - its terminal commit appends the turn's input items and output items
//     to the conversation in the commit's own transaction, so a crash
//     never leaves half a turn, and a retried or recovered commit never
//     doubles one. A failed or cancelled turn appends nothing (it only
//     frees the conversation): the turn did not happen, and the client
//     may send it again.
//
// Deleting a conversation while a turn is in flight is allowed: the turn
// runs on, and its terminal commit finds no conversation and appends
// nothing. Deleting the turn's response frees the conversation at once.

// ConversationItemsMax is the most items a conversation create or an
// items add takes, as the API documents.
const ConversationItemsMax = store.ConversationItemsMax

// conversationRetries is how often a turn re-reads a conversation whose
// items changed between its read and its create.
const conversationRetries = 3

// Conversation is a conversation as the API shows it.
type Conversation struct {
	ID        string
	CreatedAt time.Time
	Metadata  map[string]string
}

// ConversationItem is one item of a conversation: its id and its JSON as
// the API shows it.
type ConversationItem struct {
	ID   string
	JSON []byte
}

// NotFoundError is a request naming something that does not exist for its
// owner (HTTP 404). It matches store.ErrNotFound; Message is written for
// the client.
type NotFoundError struct {
	Param   string
	Message string
}

func (e *NotFoundError) Error() string { return "host: not found: " + e.Message }

// Is reports whether target is store.ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == store.ErrNotFound }

// ErrConversationsUnsupported is returned when the store keeps no
// conversations (it does not implement store.ConversationStore).
var ErrConversationsUnsupported = errors.New("host: the store keeps no conversations")

func conversationNotFound(id, param string) error {
	return &NotFoundError{Param: param, Message: fmt.Sprintf("Conversation with id '%s' not found.", id)}
}

func conversationLocked() error {
	return &InputError{Param: "conversation", Code: "conversation_locked",
		Message: "Another process is currently operating on this conversation. Please retry in a few seconds."}
}

func (h *Host) conversations() (store.ConversationStore, error) {
	cs, ok := h.store.(store.ConversationStore)
	if !ok {
		return nil, ErrConversationsUnsupported
	}
	return cs, nil
}

// getConversation returns conversation id when owner may see it.
func (h *Host) getConversation(ctx context.Context, cs store.ConversationStore, id, owner, param string) (*store.Conversation, error) {
	if !protocol.ValidConversationID(id) {
		return nil, conversationNotFound(id, param)
	}
	c, err := cs.ConversationGet(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && c.Owner != owner {
		return nil, conversationNotFound(id, param)
	}
	if err != nil {
		return nil, fmt.Errorf("host: get conversation %s: %w", id, err)
	}
	return c, nil
}

func toConversation(c *store.Conversation) (*Conversation, error) {
	out := &Conversation{ID: c.ID, CreatedAt: c.CreatedAt, Metadata: map[string]string{}}
	if len(c.Metadata) > 0 {
		if err := json.Unmarshal(c.Metadata, &out.Metadata); err != nil {
			return nil, fmt.Errorf("host: conversation %s: metadata: %w: %w", c.ID, store.ErrCorrupt, err)
		}
	}
	return out, nil
}

func encodeMetadata(m map[string]string) ([]byte, error) {
	if m == nil {
		m = map[string]string{}
	}
	return json.Marshal(m)
}

// conversationItems turns input items (item references resolved) into
// conversation items with fresh ids.
func (h *Host) conversationItems(ctx context.Context, owner string, in []InputItem) ([]store.ConversationItem, error) {
	in, err := h.resolveReferences(ctx, owner, in)
	if err != nil {
		return nil, err
	}
	return inputConversationItems(in)
}

func inputConversationItems(in []InputItem) ([]store.ConversationItem, error) {
	out := make([]store.ConversationItem, 0, len(in))
	for _, it := range in {
		id := newID(protocol.ConversationItemPrefix(it.Type))
		b, err := protocol.ConversationItemJSON(it, id)
		if err != nil {
			return nil, &InputError{Param: "items", Code: "invalid_value", Message: err.Error()}
		}
		out = append(out, store.ConversationItem{ID: id, Data: b})
	}
	return out, nil
}

func toConversationItems(items []store.ConversationItem) []ConversationItem {
	out := make([]ConversationItem, len(items))
	for i, it := range items {
		out[i] = ConversationItem{ID: it.ID, JSON: it.Data}
	}
	return out
}

// ConversationCreate creates a conversation of owner with metadata and
// its first items (at most ConversationItemsMax).
func (h *Host) ConversationCreate(ctx context.Context, owner string, metadata map[string]string, items []InputItem) (*Conversation, []ConversationItem, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, nil, err
	}
	if len(items) > ConversationItemsMax {
		return nil, nil, &InputError{Param: "items", Code: protocol.CodeArrayTooLong,
			Message: fmt.Sprintf("Invalid 'items': at most %d items, got %d.", ConversationItemsMax, len(items))}
	}
	md, err := encodeMetadata(metadata)
	if err != nil {
		return nil, nil, err
	}
	si, err := h.conversationItems(ctx, owner, items)
	if err != nil {
		return nil, nil, err
	}
	c, stored, err := cs.ConversationCreate(ctx, &store.ConversationCreateParams{
		Conversation: &store.Conversation{ID: newID("conv_"), Owner: owner, Metadata: md}, Items: si})
	if err != nil {
		return nil, nil, fmt.Errorf("host: create conversation: %w", err)
	}
	conv, err := toConversation(c)
	return conv, toConversationItems(stored), err
}

// ConversationGet returns owner's conversation id (a *NotFoundError for an
// unknown one or another owner's).
func (h *Host) ConversationGet(ctx context.Context, id, owner string) (*Conversation, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, err
	}
	c, err := h.getConversation(ctx, cs, id, owner, "")
	if err != nil {
		return nil, err
	}
	return toConversation(c)
}

// ConversationUpdate replaces the metadata of owner's conversation id.
func (h *Host) ConversationUpdate(ctx context.Context, id, owner string, metadata map[string]string) (*Conversation, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, err
	}
	if _, err := h.getConversation(ctx, cs, id, owner, ""); err != nil {
		return nil, err
	}
	md, err := encodeMetadata(metadata)
	if err != nil {
		return nil, err
	}
	c, err := cs.ConversationUpdate(ctx, id, md)
	if errors.Is(err, store.ErrNotFound) {
		return nil, conversationNotFound(id, "")
	}
	if err != nil {
		return nil, fmt.Errorf("host: update conversation %s: %w", id, err)
	}
	return toConversation(c)
}

// ConversationDelete deletes owner's conversation id and its items. A turn
// in flight goes on; its items are not appended anywhere.
func (h *Host) ConversationDelete(ctx context.Context, id, owner string) error {
	cs, err := h.conversations()
	if err != nil {
		return err
	}
	if _, err := h.getConversation(ctx, cs, id, owner, ""); err != nil {
		return err
	}
	err = cs.ConversationDelete(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return conversationNotFound(id, "")
	}
	if err != nil {
		return fmt.Errorf("host: delete conversation %s: %w", id, err)
	}
	return nil
}

// ConversationItemsAdd appends items (at most ConversationItemsMax) to
// owner's conversation id and returns them as stored.
func (h *Host) ConversationItemsAdd(ctx context.Context, id, owner string, items []InputItem) ([]ConversationItem, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, err
	}
	if len(items) == 0 || len(items) > ConversationItemsMax {
		return nil, &InputError{Param: "items", Code: protocol.CodeInvalidValue,
			Message: fmt.Sprintf("Invalid 'items': from 1 to %d items, got %d.", ConversationItemsMax, len(items))}
	}
	if _, err := h.getConversation(ctx, cs, id, owner, ""); err != nil {
		return nil, err
	}
	si, err := h.conversationItems(ctx, owner, items)
	if err != nil {
		return nil, err
	}
	stored, err := cs.ConversationItemsAdd(ctx, id, si)
	if errors.Is(err, store.ErrNotFound) {
		return nil, conversationNotFound(id, "")
	}
	if err != nil {
		return nil, fmt.Errorf("host: add items to conversation %s: %w", id, err)
	}
	return toConversationItems(stored), nil
}

// ConversationItemsParams page a conversation's items.
type ConversationItemsParams struct {
	After string // an item id: the page starts after it
	Limit int
	Desc  bool
}

// ConversationItems returns a page of the items of owner's conversation
// id, and whether more follow.
func (h *Host) ConversationItems(ctx context.Context, id, owner string, p *ConversationItemsParams) ([]ConversationItem, bool, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, false, err
	}
	if _, err := h.getConversation(ctx, cs, id, owner, ""); err != nil {
		return nil, false, err
	}
	if p.After != "" && !protocol.ValidItemID(p.After) {
		return nil, false, &InputError{Param: "after", Code: protocol.CodeInvalidValue,
			Message: fmt.Sprintf("Invalid 'after': no item with id '%s' in the conversation.", truncateID(p.After))}
	}
	items, more, err := cs.ConversationItemList(ctx, &store.ConversationItemListParams{ConversationID: id, After: p.After,
		Limit: p.Limit, Desc: p.Desc})
	if errors.Is(err, store.ErrNotFound) && p.After != "" {
		if _, gerr := cs.ConversationGet(ctx, id); gerr == nil {
			return nil, false, &InputError{Param: "after", Code: protocol.CodeInvalidValue,
				Message: fmt.Sprintf("Invalid 'after': no item with id '%s' in the conversation.", truncateID(p.After))}
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, conversationNotFound(id, "")
	}
	if err != nil {
		return nil, false, fmt.Errorf("host: list items of conversation %s: %w", id, err)
	}
	return toConversationItems(items), more, nil
}

func itemNotFound(itemID string) error {
	return &NotFoundError{Message: fmt.Sprintf("Item with id '%s' not found.", truncateID(itemID))}
}

// ConversationItem returns one item of owner's conversation id.
func (h *Host) ConversationItem(ctx context.Context, id, owner, itemID string) (*ConversationItem, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, err
	}
	if _, err := h.getConversation(ctx, cs, id, owner, ""); err != nil {
		return nil, err
	}
	if !protocol.ValidItemID(itemID) {
		return nil, itemNotFound(itemID)
	}
	it, err := cs.ConversationItemGet(ctx, id, itemID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, itemNotFound(itemID)
	}
	if err != nil {
		return nil, fmt.Errorf("host: get item %s of conversation %s: %w", itemID, id, err)
	}
	return &ConversationItem{ID: it.ID, JSON: it.Data}, nil
}

// ConversationItemDelete deletes one item of owner's conversation id and
// returns the conversation.
func (h *Host) ConversationItemDelete(ctx context.Context, id, owner, itemID string) (*Conversation, error) {
	cs, err := h.conversations()
	if err != nil {
		return nil, err
	}
	c, err := h.getConversation(ctx, cs, id, owner, "")
	if err != nil {
		return nil, err
	}
	if !protocol.ValidItemID(itemID) {
		return nil, itemNotFound(itemID)
	}
	err = cs.ConversationItemDelete(ctx, id, itemID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, itemNotFound(itemID)
	}
	if err != nil {
		return nil, fmt.Errorf("host: delete item %s of conversation %s: %w", itemID, id, err)
	}
	return toConversation(c)
}

// conversationHistory reads every item of conversation id, oldest first,
// as input items.
func conversationHistory(ctx context.Context, cs store.ConversationStore, id string) ([]InputItem, error) {
	var data [][]byte
	after := ""
	for {
		page, more, err := cs.ConversationItemList(ctx, &store.ConversationItemListParams{ConversationID: id, After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("host: read conversation %s: %w", id, err)
		}
		for _, it := range page {
			data = append(data, it.Data)
		}
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].ID
	}
	in, err := protocol.ReadItems(data)
	if err != nil {
		return nil, fmt.Errorf("host: read conversation %s: %w: %w", id, store.ErrCorrupt, err)
	}
	return in, nil
}

// createTurn creates p, a turn of conversation p.Conversation: a new run
// whose input is the conversation's items followed by p's input, holding
// the conversation until its terminal commit.
func (h *Host) createTurn(ctx context.Context, m *model, p *CreateParams) (*store.Response, error) {
	if p.PreviousResponseID != "" {
		return nil, &InputError{Param: "previous_response_id", Code: protocol.CodeInvalidValue,
			Message: "'previous_response_id' and 'conversation' cannot be used together."}
	}
	cs, err := h.conversations()
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := h.getConversation(ctx, cs, p.Conversation, p.Owner, "conversation")
		if err != nil {
			return nil, err
		}
		if c.TurnResponseID != "" {
			// Refused here already when the turn is plainly in flight;
			// the store decides for creates that race.
			if held, err := h.store.ResponseGet(ctx, c.TurnResponseID); err == nil && !held.Finished() {
				return nil, conversationLocked()
			}
		}
		history, err := conversationHistory(ctx, cs, c.ID)
		if err != nil {
			return nil, err
		}
		if err := replayedCalls(history); err != nil {
			// Items added through the API are taken as they come; a turn
			// cannot replay an answer to no call.
			msg := err.Error()
			if ie, ok := errors.AsType[*InputError](err); ok {
				msg = ie.Message
			}
			return nil, &InputError{Param: "conversation", Code: protocol.CodeInvalidValue,
				Message: "the conversation's items cannot be replayed: " + msg + "; delete that item"}
		}
		if err := replayedCalls(append(slices.Clip(history), p.Input...)); err != nil {
			return nil, err
		}
		if _, err := inputConversationItems(p.Input); err != nil {
			// Checked before anything is stored: the terminal commit must
			// be able to append every input item.
			return nil, &InputError{Param: "input", Code: protocol.CodeInvalidValue, Message: err.Error()}
		}
		q := *p
		q.history, q.turn = history, &store.ConversationTurn{ID: c.ID, Version: c.Version}
		resp, err := h.createWorkflowRun(ctx, m, &q)
		ce, ok := errors.AsType[*store.ConversationError](err)
		switch {
		case !ok:
			return resp, err
		case ce.Reason == store.ConversationGone:
			return nil, conversationNotFound(c.ID, "conversation")
		case ce.Reason == store.ConversationChanged && attempt < conversationRetries:
			continue // items added or deleted since the read: read them again
		}
		return nil, conversationLocked()
	}
}

// convTurn is what a run driving a turn of a conversation needs at its
// terminal commit: the conversation and the turn's own input items (the
// response's recorded input, store.Response.Input).
type convTurn struct {
	id    string
	input []byte
	// request is the turn's stored request, whose input the turn's is
	// when input is nil (storedInput).
	request []byte
}

// turnOf returns the turn a response is, from its snapshot; nil for none.
func turnOf(rr *store.Response, snap *protocol.Response) *convTurn {
	if snap.Conversation == nil {
		return nil
	}
	return &convTurn{id: snap.Conversation.ID, input: rr.Input, request: rr.Request}
}

// conversationAppend returns the conversation append of the terminal
// commit of r's response, resp with status: the turn's input items then
// its output items when it completed (or is incomplete), none when it
// failed or was cancelled; either way the conversation is freed. An item
// that cannot join the conversation is an error, never dropped: the
// commit fails and the response with it, so a turn is in its conversation
// whole or not at all (its input was checked when it was created).
func (h *Host) conversationAppend(r *run, status store.Status, resp *protocol.Response) (*store.ConversationAppend, error) {
	a := &store.ConversationAppend{ID: r.conv.id}
	if status != store.StatusCompleted && status != store.StatusIncomplete {
		return a, nil
	}
	in, err := storedInput(&store.Response{ID: resp.ID, Input: r.conv.input, Request: r.conv.request})
	if err != nil {
		return nil, fmt.Errorf("host: the input of turn %s cannot be read for conversation %s: %w", resp.ID, r.conv.id, err)
	}
	items, err := inputConversationItems(in)
	if err != nil {
		return nil, fmt.Errorf("host: the input of turn %s cannot join conversation %s: %w", resp.ID, r.conv.id, err)
	}
	for _, it := range resp.Output {
		b, err := it.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("host: output item %s of turn %s cannot join conversation %s: %w", it.ID, resp.ID, r.conv.id, err)
		}
		items = append(items, store.ConversationItem{ID: it.ID, Data: b})
	}
	a.Items = items
	return a, nil
}

// turnID is the conversation of a turn; "" for none.
func turnID(t *store.ConversationTurn) string {
	if t == nil {
		return ""
	}
	return t.ID
}
