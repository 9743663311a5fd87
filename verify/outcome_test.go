package verify_test

import (
	"testing"

	"github.com/superstep/superstep/verify"
)

func TestItemOutcome(t *testing.T) {
	for _, c := range []struct{ item, text, typ string }{
		{`{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"refusal","text":"x"},{"type":"output_text","text":"b"}]}`, "ab", "message"},
		{`{"type":"function_call","name":"calculate","arguments":"{\"a\":1}"}`, `function_call calculate {"a":1}`, "function_call"},
		{`{"type":"reasoning"}`, "reasoning", "reasoning"},
	} {
		text, typ, err := verify.ItemOutcome([]byte(c.item))
		if err != nil || text != c.text || typ != c.typ {
			t.Errorf("ItemOutcome(%s) = %q %q %v, want %q %q", c.item, text, typ, err, c.text, c.typ)
		}
	}
	if _, _, err := verify.ItemOutcome([]byte(`{"type":`)); err == nil {
		t.Error("ItemOutcome of broken JSON: no error")
	}
}
