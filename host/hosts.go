package host

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/superstep/superstep/store"
)

// HostInfo is one live host as Hosts sees it.
type HostInfo struct {
	ID string
	// Addr is the host's Config.Addr; known for this host only (the store
	// keeps no host records), "" for the others.
	Addr string
	// Runs are the head response IDs of the runs it drives, sorted.
	Runs []string
	// LeaseExpiresAt is the latest expiry of its leases; for this host
	// with no runs, now + LeaseDuration.
	LeaseExpiresAt time.Time
}

// Hosts returns the live hosts sorted by ID: this one, and every host that
// holds an unexpired lease on an unfinished run. It reads every run of the
// store (RunList), so its cost grows with the number of runs kept; a host
// with no run is seen only by itself.
func (h *Host) Hosts(ctx context.Context) ([]HostInfo, error) {
	now := time.Now()
	byID := map[string]*HostInfo{h.cfg.HostID: {ID: h.cfg.HostID, Addr: h.cfg.Addr,
		LeaseExpiresAt: now.Add(h.cfg.LeaseDuration)}}
	err := h.eachRun(ctx, func(r *store.Run) {
		l := r.Lease
		if !r.Active || l.Owner == "" || !l.ExpiresAt.After(now) {
			return
		}
		hi := byID[l.Owner]
		if hi == nil {
			hi = &HostInfo{ID: l.Owner}
			byID[l.Owner] = hi
		}
		hi.Runs = append(hi.Runs, r.HeadResponseID)
		if len(hi.Runs) == 1 || l.ExpiresAt.After(hi.LeaseExpiresAt) {
			hi.LeaseExpiresAt = l.ExpiresAt
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]HostInfo, 0, len(byID))
	for _, hi := range byID {
		sort.Strings(hi.Runs)
		out = append(out, *hi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// eachRun calls fn for every run of the store, page by page.
func (h *Host) eachRun(ctx context.Context, fn func(*store.Run)) error {
	after := ""
	for {
		page, err := h.store.RunList(ctx, &store.RunListParams{After: after, Limit: 500})
		if err != nil {
			return fmt.Errorf("host: list runs: %w", err)
		}
		for _, r := range page {
			fn(r)
		}
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].ID
	}
}
