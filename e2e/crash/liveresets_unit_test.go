package crash

import "testing"

// TestResetCosts: a reset takes back what a client rendered beyond the
// reset's output, by item; a first in_progress is no reset.
func TestResetCosts(t *testing.T) {
	life := func(typ, output string) streamEvent {
		return streamEvent{typ, []byte(`{"type":"` + typ + `","response":{"status":"in_progress","output":[` + output + `]}}`)}
	}
	msg := func(text string) string {
		return `{"type":"message","content":[{"type":"output_text","text":"` + text + `"}]}`
	}
	call := `{"type":"mcp_call","name":"calculate","arguments":"{}","output":"42"}`
	added := func(i, item string) streamEvent {
		return streamEvent{"response.output_item.added", []byte(`{"output_index":` + i + `,"item":` + item + `}`)}
	}
	done := func(i, item string) streamEvent {
		return streamEvent{"response.output_item.done", []byte(`{"output_index":` + i + `,"item":` + item + `}`)}
	}
	delta := func(i, d string) streamEvent {
		return streamEvent{"response.output_text.delta", []byte(`{"output_index":` + i + `,"delta":"` + d + `"}`)}
	}
	events := []streamEvent{
		life("response.created", ""), life("response.in_progress", ""),
		added("0", call), done("0", call),
		added("1", msg("")), delta("1", "Héllo"), delta("1", " world"),
		// Reset 1 keeps the call and "Hé" of the message: "llo world"
		// (9 runes) and no item taken back; it voids the open message.
		life("response.in_progress", call+","+msg("Hé")),
		delta("1", "llo"), done("1", msg("Hello")),
		// Reset 2 keeps nothing: both items (the message's "Hello", 5
		// runes) taken back, none open.
		life("response.in_progress", ""),
	}
	resets, voiding, chars, items := resetCosts(events)
	if resets != 2 || voiding != 1 || chars != 9+5 || items != 2 {
		t.Fatalf("resets %d, voiding %d, chars %d, items %d; want 2, 1, 14, 2", resets, voiding, chars, items)
	}
}
