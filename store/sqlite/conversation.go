package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/store"
)

var (
	_ store.ConversationStore = (*Store)(nil)
	_ store.PendingCallReader = (*Store)(nil)
)

const conversationColumns = "id, owner, metadata, turn_response_id, version, created_at"

func scanConversation(row interface{ Scan(...any) error }) (*store.Conversation, error) {
	var c store.Conversation
	var created int64
	if err := row.Scan(&c.ID, &c.Owner, &c.Metadata, &c.TurnResponseID, &c.Version, &created); err != nil {
		return nil, err
	}
	c.CreatedAt = fromNanos(created)
	return &c, nil
}

// ConversationCreate creates a conversation with its first items
// (store.ErrConflict when the id exists).
func (s *Store) ConversationCreate(ctx context.Context, p *store.ConversationCreateParams) (*store.Conversation, []store.ConversationItem, error) {
	if p == nil || p.Conversation == nil || p.Conversation.ID == "" {
		return nil, nil, errors.New("sqlite: conversation create: Conversation.ID is required")
	}
	now := orNow(p.Now)
	c := *p.Conversation
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.TurnResponseID, c.Version = "", 0
	var items []store.ConversationItem
	err := s.write(ctx, "conversation create", func(ctx context.Context, tx *sql.Conn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO conversations (id, owner, metadata, created_at) VALUES (?, ?, ?, ?)`,
			c.ID, c.Owner, c.Metadata, c.CreatedAt.UnixNano())
		if err != nil {
			return mapError("insert conversation", err)
		}
		items, err = appendItemsTx(ctx, tx, c.ID, "", p.Items, now)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	c.Version = int64(min(len(items), 1))
	return &c, items, nil
}

// appendItemsTx appends items to conversation id and ends turn's turn
// (when turn is not empty); it returns the items as stored, or
// store.ErrNotFound when the conversation does not exist.
func appendItemsTx(ctx context.Context, tx *sql.Conn, id, turn string, items []store.ConversationItem, now time.Time) ([]store.ConversationItem, error) {
	// A read and a plain UPDATE, not UPDATE … RETURNING: with
	// RETURNING, the inserts after it each cost more (see
	// docs/benchmarks.md, "A live append checked and advanced").
	var base int64
	if err := tx.QueryRowContext(ctx, "SELECT next_seq FROM conversations WHERE id = ?", id).Scan(&base); err != nil {
		return nil, mapError("conversation "+id, err)
	}
	_, err := tx.ExecContext(ctx, `UPDATE conversations SET next_seq = next_seq + ?1,
		version = version + (?1 > 0),
		turn_response_id = CASE WHEN ?2 <> '' AND turn_response_id = ?2 THEN '' ELSE turn_response_id END
		WHERE id = ?3`, len(items), turn, id)
	if err != nil {
		return nil, mapError("conversation "+id, err)
	}
	out := make([]store.ConversationItem, len(items))
	for i, it := range items {
		out[i] = store.ConversationItem{ID: it.ID, Seq: base + int64(i), Data: it.Data, CreatedAt: now}
		_, err := tx.ExecContext(ctx, `INSERT INTO conversation_items (conversation_id, seq, item_id, data, created_at)
			VALUES (?, ?, ?, ?, ?)`, id, out[i].Seq, it.ID, it.Data, now.UnixNano())
		if err != nil {
			return nil, mapError("insert conversation item", err)
		}
	}
	return out, nil
}

// ConversationGet returns a conversation (store.ErrNotFound).
func (s *Store) ConversationGet(ctx context.Context, id string) (*store.Conversation, error) {
	if err := s.checkOpen("conversation get"); err != nil {
		return nil, err
	}
	c, err := scanConversation(s.rdb.QueryRowContext(ctx, "SELECT "+conversationColumns+" FROM conversations WHERE id = ?", id))
	return c, mapError("conversation get "+id, err)
}

// ConversationUpdate replaces a conversation's metadata (store.ErrNotFound).
func (s *Store) ConversationUpdate(ctx context.Context, id string, metadata []byte) (*store.Conversation, error) {
	var c *store.Conversation
	err := s.write(ctx, "conversation update", func(ctx context.Context, tx *sql.Conn) (err error) {
		c, err = scanConversation(tx.QueryRowContext(ctx, "UPDATE conversations SET metadata = ? WHERE id = ? RETURNING "+
			conversationColumns, metadata, id))
		return mapError("conversation update "+id, err)
	})
	return c, err
}

// ConversationDelete deletes a conversation and its items
// (store.ErrNotFound).
func (s *Store) ConversationDelete(ctx context.Context, id string) error {
	return s.write(ctx, "conversation delete", func(ctx context.Context, tx *sql.Conn) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM conversations WHERE id = ?", id)
		if err != nil {
			return mapError("conversation delete", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sqlite: conversation delete %s: %w", id, store.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM conversation_items WHERE conversation_id = ?", id)
		return mapError("conversation delete items", err)
	})
}

// ConversationItemsAdd appends items to a conversation (store.ErrNotFound,
// store.ErrConflict for an item id it has).
func (s *Store) ConversationItemsAdd(ctx context.Context, id string, items []store.ConversationItem) ([]store.ConversationItem, error) {
	var out []store.ConversationItem
	err := s.write(ctx, "conversation items add", func(ctx context.Context, tx *sql.Conn) (err error) {
		out, err = appendItemsTx(ctx, tx, id, "", items, time.Now())
		return err
	})
	return out, err
}

// ConversationItemList returns a page of a conversation's items.
func (s *Store) ConversationItemList(ctx context.Context, p *store.ConversationItemListParams) ([]store.ConversationItem, bool, error) {
	if err := s.checkOpen("conversation item list"); err != nil {
		return nil, false, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.ConversationItemListLimitDefault
	}
	var n int
	if err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM conversations WHERE id = ?", p.ConversationID).Scan(&n); err != nil {
		return nil, false, mapError("conversation item list", err)
	}
	if n == 0 {
		return nil, false, fmt.Errorf("sqlite: conversation item list: conversation %s: %w", p.ConversationID, store.ErrNotFound)
	}
	from, cmp, order := int64(-1), ">", "ASC"
	if p.Desc {
		from, cmp, order = int64(1)<<62, "<", "DESC"
	}
	if p.After != "" {
		err := s.rdb.QueryRowContext(ctx, "SELECT seq FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
			p.ConversationID, p.After).Scan(&from)
		if err != nil {
			return nil, false, mapError("conversation item list: after "+p.After, err)
		}
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT item_id, seq, data, created_at FROM conversation_items WHERE conversation_id = ? AND seq "+
		cmp+" ? ORDER BY seq "+order+" LIMIT ?", p.ConversationID, from, limit+1)
	if err != nil {
		return nil, false, mapError("conversation item list", err)
	}
	defer rows.Close()
	var out []store.ConversationItem
	for rows.Next() {
		var it store.ConversationItem
		var created int64
		if err := rows.Scan(&it.ID, &it.Seq, &it.Data, &created); err != nil {
			return nil, false, mapError("conversation item list", err)
		}
		it.CreatedAt = fromNanos(created)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, mapError("conversation item list", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// ConversationItemGet returns one item (store.ErrNotFound).
func (s *Store) ConversationItemGet(ctx context.Context, conversationID, itemID string) (*store.ConversationItem, error) {
	if err := s.checkOpen("conversation item get"); err != nil {
		return nil, err
	}
	it := store.ConversationItem{ID: itemID}
	var created int64
	err := s.rdb.QueryRowContext(ctx, "SELECT seq, data, created_at FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
		conversationID, itemID).Scan(&it.Seq, &it.Data, &created)
	if err != nil {
		return nil, mapError("conversation item get "+itemID, err)
	}
	it.CreatedAt = fromNanos(created)
	return &it, nil
}

// ConversationItemDelete deletes one item (store.ErrNotFound).
func (s *Store) ConversationItemDelete(ctx context.Context, conversationID, itemID string) error {
	return s.write(ctx, "conversation item delete", func(ctx context.Context, tx *sql.Conn) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM conversation_items WHERE conversation_id = ? AND item_id = ?", conversationID, itemID)
		if err != nil {
			return mapError("conversation item delete", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sqlite: conversation item delete %s: %w", itemID, store.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, "UPDATE conversations SET version = version + 1 WHERE id = ?", conversationID)
		return mapError("conversation item delete", err)
	})
}

// takeTurnTx takes conversation turn's turn for response id in
// ResponseCreate's transaction (a *store.ConversationError when refused).
func takeTurnTx(ctx context.Context, tx *sql.Conn, turn *store.ConversationTurn, id string) error {
	var holder string
	var version int64
	err := tx.QueryRowContext(ctx, "SELECT turn_response_id, version FROM conversations WHERE id = ?", turn.ID).Scan(&holder, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: response create: %w", &store.ConversationError{ConversationID: turn.ID, Reason: store.ConversationGone})
	}
	if err != nil {
		return mapError("conversation "+turn.ID, err)
	}
	if holder != "" {
		var open int
		err := tx.QueryRowContext(ctx, "SELECT count(*) FROM responses WHERE id = ? AND completed_at IS NULL", holder).Scan(&open)
		if err != nil {
			return mapError("conversation turn", err)
		}
		if open > 0 {
			return fmt.Errorf("sqlite: response create: %w", &store.ConversationError{ConversationID: turn.ID,
				Reason: store.ConversationLocked, TurnResponseID: holder})
		}
	}
	if version != turn.Version {
		return fmt.Errorf("sqlite: response create: %w", &store.ConversationError{ConversationID: turn.ID, Reason: store.ConversationChanged})
	}
	_, err = tx.ExecContext(ctx, "UPDATE conversations SET turn_response_id = ? WHERE id = ?", id, turn.ID)
	return mapError("conversation turn", err)
}

// commitExtrasTx writes what a commit adds besides the superstep: its
// conversation append and its pending calls (store.CommitParams).
func commitExtrasTx(ctx context.Context, tx *sql.Conn, p *store.CommitParams, now time.Time) error {
	if a := p.Conversation; a != nil {
		_, err := appendItemsTx(ctx, tx, a.ID, p.ResponseID, a.Items, now)
		if err != nil && !errors.Is(err, store.ErrNotFound) { // a deleted conversation is skipped
			return err
		}
	}
	for _, call := range p.PendingCalls {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO pending_calls (owner, call_id, response_id)
			SELECT owner, ?, id FROM responses WHERE id = ?`, call, p.ResponseID)
		if err != nil {
			return mapError("record pending call", err)
		}
	}
	return nil
}

// PendingCallGet returns the response that left owner's call pending
// (store.ErrNotFound).
func (s *Store) PendingCallGet(ctx context.Context, owner, callID string) (string, error) {
	if err := s.checkOpen("pending call get"); err != nil {
		return "", err
	}
	var id string
	err := s.rdb.QueryRowContext(ctx, "SELECT response_id FROM pending_calls WHERE owner = ? AND call_id = ?", owner, callID).Scan(&id)
	return id, mapError("pending call get "+callID, err)
}
