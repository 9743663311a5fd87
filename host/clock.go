package host

import (
	"context"
	"sync"
	"time"

	"github.com/superstep/superstep/store"
)

// now reads the host's clock (Config.Test.Now in tests).
func (h *Host) now() time.Time {
	if h.cfg.Test.Now != nil {
		return h.cfg.Test.Now()
	}
	return time.Now()
}

// ClockSkewWarn is how far this host's clock may be off the store's
// before the host says so (stores that keep a clock of their own,
// store.Clock: PostgreSQL's server).
const ClockSkewWarn = time.Second

// storeClock maps times of a store that judges leases by a clock of its
// own (store.Clock) onto this host's clock: lease expiries are on the
// store's clock, and the lease guard compares them with this host's. It
// keeps one reading of the store's clock with the reading of this host's
// clock (its monotonic part included) taken just before, so the mapping is
// early by at most that reading's round trip, never late, and immune to a
// step of this host's wall clock. Without a reading (a store without a
// clock of its own, whose times are this host's) times map to themselves.
type storeClock struct {
	mu sync.Mutex
	// local is this host's clock just before the store's read store; rtt
	// is the round trip of that reading. Zero until the first reading.
	local, store time.Time
	rtt          time.Duration
	// skewed says the last warning found this host's clock off; warned is
	// the offset it reported.
	skewed bool
	warned time.Duration
}

// toLocal returns the time on this host's clock when the store's clock
// reads t.
func (c *storeClock) toLocal(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.local.IsZero() {
		return t
	}
	return c.local.Add(t.Sub(c.store))
}

// set keeps a reading unless its round trip is above maxRTT and above the
// kept one's (a reading taken while the store was slow maps less exactly).
func (c *storeClock) set(local, store time.Time, rtt, maxRTT time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.local.IsZero() && rtt > maxRTT && rtt > c.rtt {
		return
	}
	c.local, c.store, c.rtt = local, store, rtt
}

// syncClock reads the store's clock, when it keeps one, to map lease
// expiries onto this host's clock (see storeClock), exports this host's
// offset from it (superstep_host_clock_offset_seconds) and says, once per
// change, when this host's clock is off by more than ClockSkewWarn. A
// failed reading keeps the previous one: the store is unreachable, which
// the renewals report.
func (h *Host) syncClock(ctx context.Context, c *storeClock) {
	sc, ok := h.store.(store.Clock)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.renewTimeout())
	defer cancel()
	before := h.now()
	storeNow, err := sc.StoreNow(ctx)
	if err != nil {
		return
	}
	rtt := h.now().Sub(before)
	c.set(before, storeNow, rtt, h.cfg.LeaseDuration/10)
	// This host's clock minus the store's, at the middle of the round
	// trip (wall clocks), and how far off it is at least.
	offset := before.Add(rtt / 2).Round(0).Sub(storeNow)
	least := offset.Abs() - rtt/2
	h.metrics.clockOffset.Set(offset.Seconds())
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case least > ClockSkewWarn && (!c.skewed || (offset-c.warned).Abs() > ClockSkewWarn):
		c.skewed, c.warned = true, offset
		h.log.Warn("host: this host's clock is off the store's; leases are judged by the store's clock, "+
			"but the times this host takes from its own (response created_at, retention cut-off, host registry) are off too: check its time synchronisation",
			"offset", offset.Round(time.Millisecond), "host_time", before.Round(0), "store_time", storeNow,
			"round_trip", rtt)
	case c.skewed && offset.Abs()+rtt/2 <= ClockSkewWarn:
		c.skewed, c.warned = false, 0
		h.log.Info("host: this host's clock is in step with the store's again", "offset", offset.Round(time.Millisecond))
	}
}
