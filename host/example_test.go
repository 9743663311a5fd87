package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store/sqlite"
)

// Host a demo workflow on a SQLite file, create a response and follow its
// durable event log to the end.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "superstep-example") // only so the example can run as a test
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "superstep.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	h, err := host.New(s, &host.Config{ExclusiveStore: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := examples.Register(h); err != nil {
		fmt.Println(err)
		return
	}
	if err := h.Start(ctx); err != nil { // resumes unfinished runs
		fmt.Println(err)
		return
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = h.Shutdown(sctx)
	}()
	resp, err := h.Create(ctx, &host.CreateParams{Model: examples.Echo, Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "hello"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range h.Events(ctx, resp.ID, "", -1) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Seq, ev.Type)
	}
	// Output:
	// 0 response.created
	// 1 response.in_progress
	// 2 response.output_item.added
	// 3 response.content_part.added
	// 4 response.output_text.delta
	// 5 response.output_text.done
	// 6 response.content_part.done
	// 7 response.output_item.done
	// 8 response.completed
}
