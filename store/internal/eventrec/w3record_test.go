package eventrec

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// w3Record returns the events of the bench's W3 commit as the host writes
// them: one superstep of 200 messages of 50 bytes that completes the
// response (response.in_progress, six events per message,
// response.completed: 1,202 events, 374 KB).
func w3Record(tb testing.TB) []store.EventInput {
	c, err := protocol.Create(&protocol.NewResponseParams{ID: "resp_0123456789abcdef0123456789abcdef", Model: "bench.w3",
		Status: protocol.StatusInProgress, CreatedAt: time.Unix(1796394420, 0)})
	if err != nil {
		tb.Fatal(err)
	}
	outs := make([]protocol.Output, 200)
	for i := range outs {
		s := fmt.Sprintf("event-%04d-", i)
		outs[i] = protocol.Output{Kind: protocol.OutputMessage, Executor: "emit", Text: s + strings.Repeat("e", 50-len(s))}
	}
	c, err = protocol.ProjectStep(c.Next, protocol.Live{}, &protocol.Step{Number: 1, Status: protocol.StatusCompleted,
		At: time.Unix(1796394421, 0), Outputs: outs})
	if err != nil {
		tb.Fatal(err)
	}
	evs := make([]store.EventInput, len(c.Frames))
	for i, f := range c.Frames {
		evs[i] = store.EventInput{Seq: f.Seq, Type: f.Type, Payload: f.Payload}
	}
	return evs
}
