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
	// Addr is the host's Config.Addr as it registered it; "" for a host
	// seen only through its leases (a store without a host registry, or a
	// host of an older version).
	Addr string
	// Runs are the head response IDs of the runs it drives, sorted.
	Runs []string
	// LeaseExpiresAt is the latest of its registry entry's expiry and its
	// leases' expiries: the host counts as live until then.
	LeaseExpiresAt time.Time
}

// registry returns the store's host registry, if it has one.
func (h *Host) registry() (store.HostRegistry, bool) {
	hr, ok := h.store.(store.HostRegistry)
	return hr, ok
}

// heartbeat registers or refreshes this host in the store's registry, live
// for LeaseDuration (renewed with the leases, every LeaseDuration/3). A
// failure is logged: the host keeps working and is listed again at the
// next heartbeat.
func (h *Host) heartbeat(ctx context.Context) {
	hr, ok := h.registry()
	if !ok {
		return
	}
	if err := h.beat(ctx, hr); err != nil && ctx.Err() == nil {
		h.metrics.failed(opHeartbeat)
		h.log.Warn("host: registry heartbeat failed; retrying at the next renewal", "err", err)
	}
}

// beat writes this host's registry entry, live for LeaseDuration.
func (h *Host) beat(ctx context.Context, hr store.HostRegistry) error {
	h.mu.Lock()
	running := len(h.mu.runs)
	h.mu.Unlock()
	_, err := hr.HostHeartbeat(ctx, &store.HostHeartbeatParams{
		Host: store.HostInfo{ID: h.cfg.HostID, Addr: h.cfg.Addr, MaxRuns: h.cfg.MaxRuns, Runs: running},
		TTL:  h.cfg.LeaseDuration})
	return err
}

// Ready reports whether the host can serve requests that need the store
// now: nil when it is running and the store accepts a write within ctx —
// the host's registry heartbeat (store.HostRegistry), the write the host
// makes every LeaseDuration/3 anyway — or, for a store without a
// registry, answers a read of its runs. A read alone would miss what
// leaves reads working: a full disk, a read-only filesystem, a write lock
// held elsewhere. Errors: ErrHostClosed before Start and once Shutdown
// began (a draining host takes no new work), else the store's (it names
// the database: log it, do not show it). Each call makes one store call:
// callers bound ctx and how often they call.
func (h *Host) Ready(ctx context.Context) error {
	if !h.isRunning() {
		return ErrHostClosed
	}
	hr, ok := h.registry()
	if !ok {
		if _, err := h.store.RunList(ctx, &store.RunListParams{Limit: 1}); err != nil {
			return fmt.Errorf("host: ready: list runs: %w", err)
		}
		return nil
	}
	err := h.beat(ctx, hr)
	if !h.isRunning() {
		// Shutdown began meanwhile and may have left the registry before
		// this heartbeat landed: leave it again rather than be listed
		// for a lease after the exit.
		h.unregister(ctx)
		return ErrHostClosed
	}
	if err != nil {
		return fmt.Errorf("host: ready: registry heartbeat: %w", err)
	}
	return nil
}

// unregister removes this host from the store's registry at Shutdown,
// within ctx or 5 s after it ended (a dead host's entry expires anyway).
func (h *Host) unregister(ctx context.Context) {
	hr, ok := h.registry()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hr.HostRemove(ctx, h.cfg.HostID); err != nil {
		h.log.Warn("host: leaving the host registry failed; the entry expires on its own", "err", err)
	}
}

// Hosts returns the live hosts sorted by ID: this one, the hosts in the
// store's registry (which lists hosts driving no run too), and every host
// that holds an unexpired lease on an unfinished run (hosts of versions
// without the registry). It reads the store's active runs (RunList with
// ActiveOnly), so its cost follows the runs in flight.
func (h *Host) Hosts(ctx context.Context) ([]HostInfo, error) {
	now := time.Now()
	byID := map[string]*HostInfo{h.cfg.HostID: {ID: h.cfg.HostID, Addr: h.cfg.Addr,
		LeaseExpiresAt: now.Add(h.cfg.LeaseDuration)}}
	if hr, ok := h.registry(); ok {
		entries, err := hr.HostList(ctx, now)
		if err != nil {
			return nil, fmt.Errorf("host: list hosts: %w", err)
		}
		for _, e := range entries {
			hi := byID[e.ID]
			if hi == nil {
				hi = &HostInfo{ID: e.ID}
				byID[e.ID] = hi
			}
			if e.ID != h.cfg.HostID {
				hi.Addr = e.Addr
				hi.LeaseExpiresAt = e.ExpiresAt
			}
		}
	}
	err := h.eachActiveRun(ctx, func(r *store.Run) {
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
		if l.ExpiresAt.After(hi.LeaseExpiresAt) {
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

// eachActiveRun calls fn for every active run of the store, page by page.
func (h *Host) eachActiveRun(ctx context.Context, fn func(*store.Run)) error {
	after := ""
	for {
		page, err := h.store.RunList(ctx, &store.RunListParams{After: after, Limit: 500, ActiveOnly: true})
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
