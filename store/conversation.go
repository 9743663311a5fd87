package store

import (
	"context"
	"fmt"
	"time"
)

// Conversation is a conversation of the Conversations API: an ordered list
// of items that turns of POST /v1/responses (naming it) read as their
// context and append to, owned by an API key's owner.
type Conversation struct {
	ID    string
	Owner string // API key identity; "" when auth is off
	// Metadata is opaque JSON (the API's object of strings); nil for none.
	Metadata []byte
	// TurnResponseID names the response whose turn holds the conversation:
	// set by ResponseCreate with ResponseCreateParams.Conversation, cleared
	// by that response's commit carrying CommitParams.Conversation. A
	// response that is gone or finished holds no turn, whatever this says
	// (a deleted turn, or one finished before this field was cleared).
	TurnResponseID string
	// Version counts the changes of the items (add, delete, a turn's
	// append); a turn names the version whose items it read.
	Version   int64
	CreatedAt time.Time
}

// ConversationItem is one item of a conversation: its id and its JSON as the
// API shows it (opaque to the store), at position Seq.
type ConversationItem struct {
	ID string
	// Seq orders the conversation's items: assigned by the store, growing
	// with every item added, never reused.
	Seq       int64
	Data      []byte
	CreatedAt time.Time
}

// ConversationItemsMax is the most items one call adds (as the API
// documents for create and add); a turn's append is not limited by it.
const ConversationItemsMax = 20

// ConversationTurn, on ResponseCreateParams, makes the response a turn of
// conversation ID: ResponseCreate takes the conversation's turn for the
// response in its transaction, refusing (*ConversationError, nothing
// written) when the conversation is gone, another turn holds it, or its
// items changed since the caller read them at Version.
type ConversationTurn struct {
	ID      string
	Version int64
}

// ConversationAppend, on CommitParams (the terminal commit of a turn),
// appends Items to conversation ID in the commit's transaction and ends
// the turn of the commit's response (CommitParams.ResponseID). A
// conversation deleted meanwhile is skipped: the commit succeeds without
// it.
type ConversationAppend struct {
	ID    string
	Items []ConversationItem // ID and Data; Seq and CreatedAt are the store's
}

// ConversationReason says why ResponseCreate refused a turn.
type ConversationReason int

// Reasons for refusing a turn.
const (
	// ConversationGone: the conversation does not exist (deleted).
	ConversationGone ConversationReason = iota + 1
	// ConversationLocked: another response's turn holds it, in flight.
	ConversationLocked
	// ConversationChanged: its items changed since Version was read.
	ConversationChanged
)

// ConversationError is returned by ResponseCreate when it refuses a turn
// (see ConversationTurn). It matches ErrConflict.
type ConversationError struct {
	ConversationID string
	Reason         ConversationReason
	// TurnResponseID is the turn in flight (ConversationLocked).
	TurnResponseID string
}

func (e *ConversationError) Error() string {
	switch e.Reason {
	case ConversationGone:
		return fmt.Sprintf("store: conflict: conversation %s does not exist", e.ConversationID)
	case ConversationLocked:
		return fmt.Sprintf("store: conflict: conversation %s is held by the turn of response %s", e.ConversationID, e.TurnResponseID)
	}
	return fmt.Sprintf("store: conflict: the items of conversation %s changed", e.ConversationID)
}

// Is reports whether target is ErrConflict.
func (e *ConversationError) Is(target error) bool { return target == ErrConflict }

// ConversationCreateParams are the arguments of ConversationCreate.
type ConversationCreateParams struct {
	Conversation *Conversation // ID, Owner, Metadata; CreatedAt defaults to Now
	Items        []ConversationItem
	Now          time.Time // zero means time.Now()
}

// ConversationItemListParams are the arguments of ConversationItemList.
type ConversationItemListParams struct {
	ConversationID string
	// After, when not empty, is an item id: the list starts after it in
	// the list's order (ErrNotFound when the conversation has no such
	// item).
	After string
	Limit int  // <= 0 means 100
	Desc  bool // newest first
}

// ConversationStore is implemented by stores that keep conversations (both
// backends). It is optional: callers find it with a type assertion. A
// store that implements it honours ResponseCreateParams.Conversation and
// CommitParams.Conversation; one that does not refuses them.
//
// Items are kept in their own rows, so a turn's append writes only its own
// items, and reading a conversation costs one range scan.
type ConversationStore interface {
	// ConversationCreate creates a conversation with its first items
	// (ErrConflict when the id exists).
	ConversationCreate(ctx context.Context, p *ConversationCreateParams) (*Conversation, []ConversationItem, error)
	// ConversationGet returns a conversation (ErrNotFound).
	ConversationGet(ctx context.Context, id string) (*Conversation, error)
	// ConversationUpdate replaces its metadata and returns it (ErrNotFound).
	ConversationUpdate(ctx context.Context, id string, metadata []byte) (*Conversation, error)
	// ConversationDelete deletes a conversation and its items
	// (ErrNotFound). A turn in flight goes on; its append is skipped.
	ConversationDelete(ctx context.Context, id string) error
	// ConversationItemsAdd appends items and returns them as stored
	// (ErrNotFound for an unknown conversation, ErrConflict for an item id
	// it has).
	ConversationItemsAdd(ctx context.Context, id string, items []ConversationItem) ([]ConversationItem, error)
	// ConversationItemList returns a page of items in Seq order (reversed
	// with Desc), and whether more follow it (ErrNotFound for an unknown
	// conversation or After item).
	ConversationItemList(ctx context.Context, p *ConversationItemListParams) (items []ConversationItem, more bool, err error)
	// ConversationItemGet returns one item (ErrNotFound).
	ConversationItemGet(ctx context.Context, conversationID, itemID string) (*ConversationItem, error)
	// ConversationItemDelete deletes one item (ErrNotFound).
	ConversationItemDelete(ctx context.Context, conversationID, itemID string) error
}

// ConversationItemListLimitDefault is the page size of ConversationItemList
// when Limit is <= 0.
const ConversationItemListLimitDefault = 100
