package verify

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/store"
)

// Load reads a response's record and whole event log from s, for a
// ResponseInput.
func Load(ctx context.Context, s store.Store, id string) (*store.Response, []store.Event, error) {
	rec, err := s.ResponseGet(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: load response %s: %w", id, err)
	}
	var log []store.Event
	after := int64(-1)
	for {
		page, err := s.EventList(ctx, &store.EventListParams{ResponseID: id, After: after})
		if err != nil {
			return nil, nil, fmt.Errorf("verify: load events of %s after %d: %w", id, after, err)
		}
		if len(page) == 0 {
			return rec, log, nil
		}
		if next := page[len(page)-1].Seq; next > after {
			after = next
		} else {
			return nil, nil, fmt.Errorf("verify: load events of %s: page after %d ends at seq %d", id, after, next)
		}
		log = append(log, page...)
	}
}
