package crash

import "testing"

// TestResetCosts: a reset takes back what a client rendered beyond the
// reset's output, by item; a first in_progress is no reset, nor is one a
// commit wrote.
func TestResetCosts(t *testing.T) {
	lifeAt := func(step int64, typ, output string) streamEvent {
		return streamEvent{typ, []byte(`{"type":"` + typ + `","response":{"status":"in_progress","output":[` + output + `]}}`), step}
	}
	life := func(typ, output string) streamEvent { return lifeAt(-1, typ, output) }
	msg := func(text string) string {
		return `{"type":"message","content":[{"type":"output_text","text":"` + text + `"}]}`
	}
	call := `{"type":"mcp_call","name":"calculate","arguments":"{}","output":"42"}`
	added := func(i, item string) streamEvent {
		return streamEvent{"response.output_item.added", []byte(`{"output_index":` + i + `,"item":` + item + `}`), -1}
	}
	done := func(i, item string) streamEvent {
		return streamEvent{"response.output_item.done", []byte(`{"output_index":` + i + `,"item":` + item + `}`), -1}
	}
	delta := func(i, d string) streamEvent {
		return streamEvent{"response.output_text.delta", []byte(`{"output_index":` + i + `,"delta":"` + d + `"}`), -1}
	}
	events := []streamEvent{
		lifeAt(0, "response.created", ""), lifeAt(0, "response.in_progress", ""),
		added("0", call), done("0", call),
		added("1", msg("")), delta("1", "Héllo"), delta("1", " world"),
		// Reset 1 keeps the call and "Hé" of the message: "llo world"
		// (9 runes) and no item taken back; it voids the open message.
		life("response.in_progress", call+","+msg("Hé")),
		delta("1", "llo"), done("1", msg("Hello")),
		// Reset 2 keeps nothing: both items (the message's "Hello", 5
		// runes) taken back, none open.
		life("response.in_progress", ""),
		// A commit withdraws an intermediate reply ("Hi there", 8 runes):
		// no reset.
		added("0", msg("")), delta("0", "Hi there"),
		lifeAt(2, "response.in_progress", ""),
	}
	got := resetCosts(events)
	if want := (resetCounts{resets: 2, voiding: 1, chars: 9 + 5, items: 2, commitResets: 1, commitChars: 8}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
