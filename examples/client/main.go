// Command client is the quickstart client for a local `superstep serve`:
// it streams demo.two-outputs, then starts demo.silent in the background
// and polls it, with the official openai-go v3 SDK unchanged.
//
//	go run ./examples/client                       # server at http://127.0.0.1:8080
//	SUPERSTEP_URL=http://127.0.0.1:9000/v1 go run ./examples/client
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	baseURL := os.Getenv("SUPERSTEP_URL")
	if baseURL == "" {
		baseURL = "http://127.0.0.1:8080/v1"
	}
	key := os.Getenv("SUPERSTEP_API_KEY") // only needed when the server has --api-keys
	if key == "" {
		key = "unused"
	}
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(key))
	if err := stream(ctx, client); err != nil {
		return err
	}
	return background(ctx, client)
}

// stream prints each output as the server commits it, remembering the
// cursor: after a dropped connection it resumes with GetStreaming.
func stream(ctx context.Context, client openai.Client) error {
	st := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo.two-outputs",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
	})
	id, cursor := "", int64(-1)
	for attempt := 0; ; attempt++ {
		for st.Next() {
			ev := st.Current()
			cursor = ev.SequenceNumber
			switch ev.Type {
			case "response.created":
				id = ev.Response.ID
				fmt.Println("stream: created", id)
			case "response.output_text.done":
				fmt.Println("stream: output", ev.Text)
			case "response.completed":
				fmt.Println("stream: completed")
			}
		}
		if st.Err() == nil {
			return nil
		}
		if id == "" || attempt == 3 {
			return fmt.Errorf("stream: %w", st.Err())
		}
		fmt.Printf("stream: connection lost (%v); resuming after %d\n", st.Err(), cursor)
		st = client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(cursor)})
	}
}

// background starts a run that keeps going without the client and polls it.
func background(ctx context.Context, client openai.Client) error {
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:      "demo.silent",
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("go")},
		Background: openai.Bool(true),
		Metadata:   shared.Metadata{"steps": "3", "step_delay_ms": "200"},
	})
	if err != nil {
		return fmt.Errorf("background: %w", err)
	}
	fmt.Println("background:", r.ID, r.Status)
	for r.Status == "queued" || r.Status == "in_progress" {
		time.Sleep(250 * time.Millisecond)
		if r, err = client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		fmt.Println("background:", r.Status)
	}
	fmt.Println("background: output", r.OutputText())
	return nil
}
