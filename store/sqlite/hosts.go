package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/superstep/superstep/store"
)

var (
	_ store.HostRegistry = (*Store)(nil)
	_ store.Notifier     = (*Store)(nil)
)

const hostColumns = "id, addr, max_runs, runs, started_at, heartbeat_at, expires_at"

func scanHost(row interface{ Scan(...any) error }) (*store.HostInfo, error) {
	var h store.HostInfo
	var started, beat, expires int64
	if err := row.Scan(&h.ID, &h.Addr, &h.MaxRuns, &h.Runs, &started, &beat, &expires); err != nil {
		return nil, err
	}
	h.StartedAt, h.HeartbeatAt, h.ExpiresAt = fromNanos(started), fromNanos(beat), fromNanos(expires)
	return &h, nil
}

// HostHeartbeat upserts the host's row, live until Now+TTL, and deletes the
// rows of other hosts that expired.
func (s *Store) HostHeartbeat(ctx context.Context, p *store.HostHeartbeatParams) (*store.HostInfo, error) {
	if p.Host.ID == "" || p.TTL <= 0 {
		return nil, errors.New("sqlite: host heartbeat: Host.ID and a TTL > 0 are required")
	}
	now := orNow(p.Now)
	var h *store.HostInfo
	err := s.write(ctx, "host heartbeat", func(ctx context.Context, tx *sql.Conn) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM hosts WHERE expires_at <= ? AND id != ?", now.UnixNano(), p.Host.ID); err != nil {
			return err
		}
		var err error
		h, err = scanHost(tx.QueryRowContext(ctx, `INSERT INTO hosts (`+hostColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, max_runs = excluded.max_runs, runs = excluded.runs,
				heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at
			RETURNING `+hostColumns,
			p.Host.ID, p.Host.Addr, p.Host.MaxRuns, p.Host.Runs, now.UnixNano(), now.UnixNano(), now.Add(p.TTL).UnixNano()))
		return err
	})
	if err != nil {
		return nil, mapError("host heartbeat", err)
	}
	return h, nil
}

// HostList returns the hosts whose row is live at now, sorted by ID.
func (s *Store) HostList(ctx context.Context, now time.Time) ([]*store.HostInfo, error) {
	if err := s.checkOpen("host list"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+hostColumns+" FROM hosts WHERE expires_at > ? ORDER BY id", orNow(now).UnixNano())
	if err != nil {
		return nil, mapError("host list", err)
	}
	defer rows.Close()
	var hosts []*store.HostInfo
	for rows.Next() {
		h, err := scanHost(rows)
		if err != nil {
			return nil, mapError("host list", err)
		}
		hosts = append(hosts, h)
	}
	return hosts, mapError("host list", rows.Err())
}

// HostRemove deletes the host's row; an absent row is not an error.
func (s *Store) HostRemove(ctx context.Context, id string) error {
	return s.write(ctx, "host remove", func(ctx context.Context, tx *sql.Conn) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM hosts WHERE id = ?", id)
		return err
	})
}

// Notices subscribes to the cancels and ready runs announced through this
// store (see store.Notifier). One process owns the file, so every notice
// is made here and delivered in-process right after its write committed.
func (s *Store) Notices(ctx context.Context, buffer int) <-chan store.Notice {
	return s.notices.Subscribe(ctx, buffer)
}
