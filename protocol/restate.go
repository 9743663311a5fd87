package protocol

// RestateLive returns the frames, numbered from next, of a reset
// response.in_progress (carrying st's committed output) followed by
// live's items published again as they stand, and the Live after them.
// The host appends them when the log holds live frames past the last
// commit that the running superstep did not reproduce (a recovered
// superstep that diverged from what the interrupted attempt streamed):
// they withdraw those frames and keep what the superstep published so
// far, so that what follows the reset is a complete history by itself.
// A zero live gives the reset alone.
func RestateLive(st State, next int64, live Live) ([]Frame, Live, error) {
	l := Live{step: live.step}
	seq := &Seq{Next: next}
	if err := restate(seq, st.Response, &l, live.items); err != nil {
		return nil, live, err
	}
	return seq.Frames, l, nil
}

// Items returns how many items the Live holds (open or closed live).
func (l Live) Items() int { return len(l.items) }
