package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var _ store.HostRegistry = (*Store)(nil)

const hostColumns = "id, addr, max_runs, runs, started_at, heartbeat_at, expires_at"

func scanHost(row pgx.Row) (*store.HostInfo, error) {
	var h store.HostInfo
	var maxRuns, runs int32
	if err := row.Scan(&h.ID, &h.Addr, &maxRuns, &runs, &h.StartedAt, &h.HeartbeatAt, &h.ExpiresAt); err != nil {
		return nil, err
	}
	h.MaxRuns, h.Runs = int(maxRuns), int(runs)
	h.StartedAt, h.HeartbeatAt, h.ExpiresAt = h.StartedAt.UTC(), h.HeartbeatAt.UTC(), h.ExpiresAt.UTC()
	return &h, nil
}

// HostHeartbeat upserts the host's row, live until Now+TTL, and deletes the
// rows of other hosts that expired. Expired rows locked by a concurrent
// heartbeat are skipped, so heartbeats never wait for each other.
func (s *Store) HostHeartbeat(ctx context.Context, p *store.HostHeartbeatParams) (*store.HostInfo, error) {
	now, err := s.begin(p.Now)
	if err != nil {
		return nil, err
	}
	if p.Host.ID == "" || p.TTL <= 0 {
		return nil, errors.New("store/postgres: host heartbeat: Host.ID and a TTL > 0 are required")
	}
	var h *store.HostInfo
	err = s.writeOn(ctx, s.leases, func(ctx context.Context, conn *pgxpool.Conn) error {
		h, err = scanHost(conn.QueryRow(ctx, `WITH gc AS (
			DELETE FROM hosts WHERE id IN (
				SELECT id FROM hosts WHERE expires_at <= $5 AND id <> $1 FOR UPDATE SKIP LOCKED))
		INSERT INTO hosts AS h (`+hostColumns+`) VALUES ($1, $2, $3, $4, $5, $5, $6)
		ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, max_runs = excluded.max_runs, runs = excluded.runs,
			heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at
		RETURNING `+hostColumns,
			p.Host.ID, p.Host.Addr, int32(p.Host.MaxRuns), int32(p.Host.Runs), now, now.Add(p.TTL)))
		return err
	})
	if err != nil {
		return nil, mapError("heartbeat of host "+p.Host.ID, "", 0, err)
	}
	return h, nil
}

// HostList returns the hosts whose row is live at now, sorted by ID.
func (s *Store) HostList(ctx context.Context, now time.Time) ([]*store.HostInfo, error) {
	now, err := s.begin(now)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT "+hostColumns+" FROM hosts WHERE expires_at > $1 ORDER BY id", now)
	if err != nil {
		return nil, mapError("list hosts", "", 0, err)
	}
	hosts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.HostInfo, error) { return scanHost(row) })
	return hosts, mapError("list hosts", "", 0, err)
}

// HostRemove deletes the host's row; an absent row is not an error.
func (s *Store) HostRemove(ctx context.Context, id string) error {
	if _, err := s.begin(time.Time{}); err != nil {
		return err
	}
	_, err := s.execWrite(ctx, "DELETE FROM hosts WHERE id = $1", id)
	return mapError("remove host "+id, "", 0, err)
}
