package eventrec

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
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

// TestEncoderWindow: compressing an 8 MiB reply's record makes a zstd
// encoder allocate, and keep for the life of the process, at most 4 MiB
// (3.1 MB: its history, twice encoderWindow, and block buffers), where
// SpeedFastest's default window of 4 MiB made it 9.4 MB; and the window
// costs the record nothing: its text is stored once before compression
// (references), so a record compressed with the default window is at
// most 1% smaller.
func TestEncoderWindow(t *testing.T) {
	shared := bigReplyRecord(8 << 20)
	// A fresh encoder of the package's options, so that the history
	// counted is this call's, whatever other tests compressed before.
	enc := mustEncoder()
	dst := make([]byte, 0, len(shared))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := enc.EncodeAll(shared, dst)
	runtime.ReadMemStats(&after)
	// What a fresh encoder allocates is its history (which it keeps
	// until the process ends) and a few block buffers.
	held := after.TotalAlloc - before.TotalAlloc
	t.Logf("an encoder allocated %d bytes to compress %d to %d", held, len(shared), len(out))
	if held > 4<<20 {
		t.Errorf("an encoder allocated (and keeps) %d bytes to compress an 8 MiB reply's record, want at most 4 MiB", held)
	}
	def, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if d := def.EncodeAll(shared, nil); float64(len(out)) > 1.01*float64(len(d)) {
		t.Errorf("the record compressed to %d bytes, %d with the default window", len(out), len(d))
	}
}

// bigReplyRecord returns the shared record (encode) of the final commit
// of a reply of n characters of serve's bigText.
func bigReplyRecord(n int) []byte {
	r := rand.New(rand.NewPCG(14, 6))
	const alphabet = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz      \"\n<>&"
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	text := quoted(b.String())
	return encode(events(`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":`+text+`,"logprobs":[]}`,
		`{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":`+text+`,"logprobs":[]}`,
		`{"type":"response.content_part.done","item_id":"msg_1","part":{"type":"output_text","text":`+text+`,"annotations":[]}}`,
		`{"type":"response.output_item.done","item":{"id":"msg_1","content":[{"type":"output_text","text":`+text+`}]}}`,
		`{"type":"response.completed","response":{"output":[{"content":[{"text":`+text+`}]}],"x":1}}`))
}
