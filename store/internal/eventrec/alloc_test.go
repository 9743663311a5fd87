package eventrec

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// TestEncodeBigReplyAllocs: the record of a committed 2 MiB reply (its text
// in five events, stored once, compressed) allocates about the shared
// record and the compressed one, each at its size: the shared record's
// buffer was grown by a copy for the few hundred bytes past its guess,
// and zstd's result by copies block by block (5.3 records allocated).
func TestEncodeBigReplyAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 6))
	const alphabet = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz      \"\n<>&" // serve's bigText
	var b strings.Builder
	for range 2 << 20 {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	text := quoted(b.String())
	other := strings.Repeat(`"field":"value",`, 70) // what a response holds besides its output
	evs := events(`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":`+text+`,"logprobs":[]}`,
		`{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":`+text+`,"logprobs":[]}`,
		`{"type":"response.content_part.done","item_id":"msg_1","part":{"type":"output_text","text":`+text+`,"annotations":[]}}`,
		`{"type":"response.output_item.done","item":{"id":"msg_1","content":[{"type":"output_text","text":`+text+`}]}}`,
		`{"type":"response.completed","response":{`+other+`"output":[{"content":[{"text":`+text+`}]}],`+other+`"x":1}}`)
	for range runtime.GOMAXPROCS(0) {
		Encode(evs) // zstd's encoders (one per P, taken in turn) made, their history allocated
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := Encode(evs)
	runtime.ReadMemStats(&after)
	shared := encode(evs)
	if len(rec) >= len(shared) {
		t.Fatalf("the record of %d bytes was not compressed (%d)", len(shared), len(rec))
	}
	decodeAll(t, rec, evs)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Encode allocated %d bytes: %.2f shared records of %d (compressed to %d)", alloc, float64(alloc)/float64(len(shared)), len(shared), len(rec))
	if float64(alloc) > 2.1*float64(len(shared)) {
		t.Fatalf("Encode allocated %d bytes for a shared record of %d (%.2f times)", alloc, len(shared), float64(alloc)/float64(len(shared)))
	}
}
