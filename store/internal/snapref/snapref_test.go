package snapref

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

func events(snap []byte) []store.EventInput {
	return []store.EventInput{
		{Seq: 7, Type: "response.output_text.done", Payload: []byte(`{"type":"response.output_text.done","text":"x"}`)},
		{Seq: 8, Type: "response.completed", Payload: fmt.Appendf(nil, `{"type":"response.completed","sequence_number":8,"response":%s}`, snap)},
	}
}

func TestEncodeRead(t *testing.T) {
	snap := fmt.Appendf(nil, `{"id":"resp_1","output":[{"text":%q}]}`, strings.Repeat("text <&> \"q\"\n", 400))
	evs := events(snap)
	stored := Encode(snap, evs)
	if len(stored) > 40 || !bytes.HasPrefix(stored, []byte(magic)) {
		t.Fatalf("Encode stored %d bytes (%.20q), want a short reference", len(stored), stored)
	}
	list := func(id string, seq int64) (*store.Event, error) {
		for _, ev := range evs {
			if ev.Seq == seq {
				return &store.Event{ResponseID: id, Seq: ev.Seq, Type: ev.Type, Payload: ev.Payload}, nil
			}
		}
		return nil, store.ErrNotFound
	}
	got, err := Read("resp_1", stored, list)
	if err != nil || !bytes.Equal(got, snap) {
		t.Fatalf("Read = %d bytes (%v), want the %d-byte snapshot", len(got), err, len(snap))
	}

	// Not stored by reference: short, carried by no event, or not where a
	// lifecycle event holds it (the end).
	short := []byte(`{"id":"resp_1"}`)
	inner := fmt.Appendf(nil, `{"response":%s,"x":1}`, snap)
	for name, c := range map[string]struct {
		snap []byte
		evs  []store.EventInput
	}{
		"short":      {short, events(short)},
		"no event":   {snap, nil},
		"other":      {snap, events(append(snap[:len(snap)-1:len(snap)-1], ' ', '}'))},
		"not at end": {snap, []store.EventInput{{Seq: 1, Payload: inner}}},
		"nil":        {nil, events(nil)},
	} {
		stored := Encode(c.snap, c.evs)
		if !bytes.Equal(stored, c.snap) || (stored == nil) != (c.snap == nil) {
			t.Errorf("%s: Encode stored %.30q, want the snapshot itself", name, stored)
		}
		got, err := Read("resp_1", stored, list)
		if err != nil || !bytes.Equal(got, c.snap) {
			t.Errorf("%s: Read = %.30q (%v), want the snapshot", name, got, err)
		}
	}
}

// A reference whose event is missing, or whose bytes changed, or that does
// not decode is store.ErrCorrupt, never other bytes.
func TestReadCorrupt(t *testing.T) {
	snap := fmt.Appendf(nil, `{"id":"resp_1","text":%q}`, strings.Repeat("y", MinBytes))
	evs := events(snap)
	stored := Encode(snap, evs)
	changed := bytes.Clone(evs[1].Payload)
	changed[len(changed)-10] = 'z'
	for name, c := range map[string]struct {
		stored []byte
		ev     *store.Event
	}{
		"changed bytes": {stored, &store.Event{Seq: 8, Payload: changed}},
		"short payload": {stored, &store.Event{Seq: 8, Payload: changed[:100]}},
		"missing event": {stored, nil},
		"other event":   {stored, &store.Event{Seq: 9, Payload: evs[1].Payload}},
		"truncated ref": {stored[:len(stored)-1], &store.Event{Seq: 8, Payload: evs[1].Payload}},
		"bad varint":    {append([]byte(magic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), nil},
	} {
		got, err := Read("resp_1", c.stored, func(string, int64) (*store.Event, error) { return c.ev, nil })
		if !errors.Is(err, store.ErrCorrupt) || got != nil {
			t.Errorf("%s: Read = %.30q, %v; want nil and ErrCorrupt", name, got, err)
		}
	}
	// An error reading the event is returned as it is.
	_, err := Read("resp_1", stored, func(string, int64) (*store.Event, error) { return nil, store.ErrNotFound })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read with the event's read failing: %v, want ErrNotFound", err)
	}
}
