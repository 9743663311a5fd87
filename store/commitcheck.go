package store

import (
	"errors"
	"fmt"
)

// CheckFinishing refuses what only the commit that finishes a response may
// carry when p's Status is not terminal: Release, Webhooks, a Conversation
// append (it ends the turn, so a second turn could start while this one
// runs) and PendingCalls; and a webhook without its EventID, Type or
// Endpoint. Both backends call it before writing anything.
func (p *CommitParams) CheckFinishing() error {
	if !p.Status.Terminal() {
		var what string
		switch {
		case p.Release:
			what = "Release"
		case len(p.Webhooks) > 0:
			what = "webhooks"
		case p.Conversation != nil:
			what = "a conversation append"
		case len(p.PendingCalls) > 0:
			what = "pending calls"
		}
		if what != "" {
			return fmt.Errorf("%s with status %q: only the commit that finishes a response carries them", what, p.Status)
		}
	}
	for _, w := range p.Webhooks {
		if w.EventID == "" || w.Type == "" || w.Endpoint == "" {
			return errors.New("a webhook needs an EventID, a Type and an Endpoint")
		}
	}
	return nil
}
