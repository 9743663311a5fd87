package host

// reserve reserves up to want run slots (want < 0: every free one) under
// Config.MaxRuns and returns how many it reserved, and whether the host
// has a cap at all (without one nothing is reserved). Release the
// reservation with unreserve once the runs are registered or given up.
func (h *Host) reserve(want int) (int, bool) {
	if h.cfg.MaxRuns == 0 {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	free := h.cfg.MaxRuns - len(h.mu.runs) - h.mu.reserved
	if free < 0 {
		free = 0
	}
	if want >= 0 && want < free {
		free = want
	}
	h.mu.reserved += free
	return free, true
}

// freeSlots returns how many more runs the host may drive under
// Config.MaxRuns, and whether it has a cap at all.
func (h *Host) freeSlots() (int, bool) {
	if h.cfg.MaxRuns == 0 {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(0, h.cfg.MaxRuns-len(h.mu.runs)-h.mu.reserved), true
}

// unreserve releases n reserved slots.
func (h *Host) unreserve(n int) {
	if n == 0 {
		return
	}
	h.mu.Lock()
	h.mu.reserved -= n
	h.mu.Unlock()
}

// kickClaim wakes the lease loop to claim runs now.
func (h *Host) kickClaim() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}
