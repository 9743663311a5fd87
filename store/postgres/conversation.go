package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var (
	_ store.ConversationStore = (*Store)(nil)
	_ store.PendingCallReader = (*Store)(nil)
)

const conversationColumns = "id, owner, metadata, turn_response_id, version, created_at"

func scanConversation(row pgx.Row) (*store.Conversation, error) {
	var c store.Conversation
	if err := row.Scan(&c.ID, &c.Owner, &c.Metadata, &c.TurnResponseID, &c.Version, &c.CreatedAt); err != nil {
		return nil, err
	}
	return &c, nil
}

// ConversationCreate creates a conversation with its first items
// (store.ErrConflict when the id exists).
func (s *Store) ConversationCreate(ctx context.Context, p *store.ConversationCreateParams) (*store.Conversation, []store.ConversationItem, error) {
	if p == nil || p.Conversation == nil || p.Conversation.ID == "" {
		return nil, nil, errors.New("store/postgres: conversation create: Conversation.ID is required")
	}
	if _, err := s.begin(p.Now); err != nil {
		return nil, nil, err
	}
	now := callTime(p.Now)
	var created *time.Time
	if !p.Conversation.CreatedAt.IsZero() {
		t := normTime(p.Conversation.CreatedAt)
		created = &t
	}
	var c *store.Conversation
	var items []store.ConversationItem
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		c, err = scanConversation(tx.QueryRow(ctx, `INSERT INTO conversations (id, owner, metadata, created_at)
			VALUES ($1, $2, $3, coalesce($4::timestamptz, $5::timestamptz, now())) RETURNING `+conversationColumns,
			p.Conversation.ID, p.Conversation.Owner, p.Conversation.Metadata, created, now))
		if err != nil {
			return err
		}
		items, err = appendItems(ctx, tx, c.ID, "", p.Items, now)
		return err
	})
	if err != nil {
		return nil, nil, mapError("create conversation "+p.Conversation.ID, "", 0, err)
	}
	c.Version = int64(min(len(items), 1))
	return c, items, nil
}

// appendItems appends items to conversation id and ends turn's turn (when
// turn is not empty), in one statement: the conversation's row is updated
// (locked) and the items inserted after its next_seq. It returns the items
// as stored, or pgx.ErrNoRows when the conversation does not exist.
func appendItems(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, id, turn string, items []store.ConversationItem, now *time.Time) ([]store.ConversationItem, error) {
	ids := make([]string, len(items))
	data := make([][]byte, len(items))
	for i, it := range items {
		ids[i], data[i] = it.ID, it.Data
	}
	rows, err := q.Query(ctx, `WITH c AS (
			UPDATE conversations SET next_seq = next_seq + $2, version = version + CASE WHEN $2 > 0 THEN 1 ELSE 0 END,
				turn_response_id = CASE WHEN $3 <> '' AND turn_response_id = $3 THEN '' ELSE turn_response_id END
			WHERE id = $1 RETURNING next_seq - $2 AS base),
		ins AS (INSERT INTO conversation_items (conversation_id, seq, item_id, data, created_at)
			SELECT $1, c.base + u.n - 1, u.item_id, u.data, coalesce($6::timestamptz, now())
			FROM c, unnest($4::text[], $5::bytea[]) WITH ORDINALITY AS u(item_id, data, n)
			RETURNING created_at)
		SELECT c.base, (SELECT min(created_at) FROM ins) FROM c`,
		id, int64(len(items)), turn, ids, data, now)
	if err != nil {
		return nil, err
	}
	var base int64
	var at *time.Time
	found := false
	for rows.Next() {
		if err := rows.Scan(&base, &at); err != nil {
			rows.Close()
			return nil, err
		}
		found = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, pgx.ErrNoRows
	}
	out := make([]store.ConversationItem, len(items))
	for i, it := range items {
		out[i] = store.ConversationItem{ID: it.ID, Seq: base + int64(i), Data: it.Data}
		if at != nil {
			out[i].CreatedAt = *at
		}
	}
	return out, nil
}

// ConversationGet returns a conversation (store.ErrNotFound).
func (s *Store) ConversationGet(ctx context.Context, id string) (*store.Conversation, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	c, err := scanConversation(s.pool.QueryRow(ctx, "SELECT "+conversationColumns+" FROM conversations WHERE id = $1", id))
	return c, mapError("get conversation "+id, "", 0, err)
}

// ConversationUpdate replaces a conversation's metadata (store.ErrNotFound).
func (s *Store) ConversationUpdate(ctx context.Context, id string, metadata []byte) (*store.Conversation, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	var c *store.Conversation
	err := s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) (err error) {
		c, err = scanConversation(conn.QueryRow(ctx, "UPDATE conversations SET metadata = $2 WHERE id = $1 RETURNING "+
			conversationColumns, id, metadata))
		return err
	})
	return c, mapError("update conversation "+id, "", 0, err)
}

// ConversationDelete deletes a conversation and its items
// (store.ErrNotFound).
func (s *Store) ConversationDelete(ctx context.Context, id string) error {
	if _, err := s.begin(time.Time{}); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM conversations WHERE id = $1", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("store/postgres: delete conversation %s: %w", id, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, "DELETE FROM conversation_items WHERE conversation_id = $1", id)
		return err
	})
	return mapError("delete conversation "+id, "", 0, err)
}

// ConversationItemsAdd appends items to a conversation (store.ErrNotFound,
// store.ErrConflict for an item id it has).
func (s *Store) ConversationItemsAdd(ctx context.Context, id string, items []store.ConversationItem) ([]store.ConversationItem, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	var out []store.ConversationItem
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
		out, err = appendItems(ctx, tx, id, "", items, nil)
		return err
	})
	return out, mapError("add items to conversation "+id, "", 0, err)
}

// ConversationItemList returns a page of a conversation's items.
func (s *Store) ConversationItemList(ctx context.Context, p *store.ConversationItemListParams) ([]store.ConversationItem, bool, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, false, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.ConversationItemListLimitDefault
	}
	op := "list items of conversation " + p.ConversationID
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM conversations WHERE id = $1", p.ConversationID).Scan(&n); err != nil {
		return nil, false, mapError(op, "", 0, err)
	}
	if n == 0 {
		return nil, false, fmt.Errorf("store/postgres: %s: %w", op, store.ErrNotFound)
	}
	from, cmp, order := int64(-1), ">", "ASC"
	if p.Desc {
		from, cmp, order = int64(1)<<62, "<", "DESC"
	}
	if p.After != "" {
		err := s.pool.QueryRow(ctx, "SELECT seq FROM conversation_items WHERE conversation_id = $1 AND item_id = $2",
			p.ConversationID, p.After).Scan(&from)
		if err != nil {
			return nil, false, mapError(op+": after "+p.After, "", 0, err)
		}
	}
	rows, err := s.pool.Query(ctx, "SELECT item_id, seq, data, created_at FROM conversation_items WHERE conversation_id = $1 AND seq "+
		cmp+" $2 ORDER BY seq "+order+" LIMIT $3", p.ConversationID, from, limit+1)
	if err != nil {
		return nil, false, mapError(op, "", 0, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ConversationItem, error) {
		var it store.ConversationItem
		err := row.Scan(&it.ID, &it.Seq, &it.Data, &it.CreatedAt)
		return it, err
	})
	if err != nil {
		return nil, false, mapError(op, "", 0, err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// ConversationItemGet returns one item (store.ErrNotFound).
func (s *Store) ConversationItemGet(ctx context.Context, conversationID, itemID string) (*store.ConversationItem, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return nil, err
	}
	it := store.ConversationItem{ID: itemID}
	err := s.pool.QueryRow(ctx, "SELECT seq, data, created_at FROM conversation_items WHERE conversation_id = $1 AND item_id = $2",
		conversationID, itemID).Scan(&it.Seq, &it.Data, &it.CreatedAt)
	if err != nil {
		return nil, mapError("get conversation item "+itemID, "", 0, err)
	}
	return &it, nil
}

// ConversationItemDelete deletes one item (store.ErrNotFound).
func (s *Store) ConversationItemDelete(ctx context.Context, conversationID, itemID string) error {
	if _, err := s.begin(time.Time{}); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM conversation_items WHERE conversation_id = $1 AND item_id = $2", conversationID, itemID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("store/postgres: delete conversation item %s: %w", itemID, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, "UPDATE conversations SET version = version + 1 WHERE id = $1", conversationID)
		return err
	})
	return mapError("delete conversation item "+itemID, "", 0, err)
}

// takeTurn takes conversation turn's turn for response id in
// ResponseCreate's transaction (a *store.ConversationError when refused).
// The conversation's row is locked first; the holder's state is read by a
// statement of its own, so that, in READ COMMITTED, it sees a holder that
// committed while this transaction waited for the lock.
func takeTurn(ctx context.Context, tx pgx.Tx, turn *store.ConversationTurn, id string) error {
	var holder string
	var version int64
	err := tx.QueryRow(ctx, "SELECT turn_response_id, version FROM conversations WHERE id = $1 FOR UPDATE", turn.ID).Scan(&holder, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return &store.ConversationError{ConversationID: turn.ID, Reason: store.ConversationGone}
	}
	if err != nil {
		return err
	}
	if holder != "" {
		var open bool
		err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM responses WHERE id = $1 AND completed_at IS NULL)", holder).Scan(&open)
		if err != nil {
			return err
		}
		if open {
			return &store.ConversationError{ConversationID: turn.ID, Reason: store.ConversationLocked, TurnResponseID: holder}
		}
	}
	if version != turn.Version {
		return &store.ConversationError{ConversationID: turn.ID, Reason: store.ConversationChanged}
	}
	_, err = tx.Exec(ctx, "UPDATE conversations SET turn_response_id = $2 WHERE id = $1", turn.ID, id)
	return err
}

// PendingCallGet returns the response that left owner's call pending
// (store.ErrNotFound).
func (s *Store) PendingCallGet(ctx context.Context, owner, callID string) (string, error) {
	if _, err := s.begin(time.Time{}); err != nil {
		return "", err
	}
	var id string
	err := s.pool.QueryRow(ctx, "SELECT response_id FROM pending_calls WHERE owner = $1 AND call_id = $2", owner, callID).Scan(&id)
	return id, mapError("get pending call "+callID, "", 0, err)
}
