package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oresponses "github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/responses"
	"github.com/superstep/superstep/store/sqlite"
)

// superstepHTTP is superstep on SQLite (FULL) or PostgreSQL behind its
// Responses API (a real HTTP server on loopback), driven by the official
// openai-go client: W1 and W2 as plain (blocking) creates, W3 streamed
// over SSE.
type superstepHTTP struct {
	inner  *superstepSys
	srv    *httptest.Server
	client openai.Client
}

func newSuperstepHTTP(path string) *superstepHTTP {
	return &superstepHTTP{inner: newSuperstepSQLite(path, sqlite.SynchronousFull)}
}

// newSuperstepHTTPPostgres is superstepHTTP over superstep's PostgreSQL
// store (default pool, group commit as -pg-group-commit says).
func newSuperstepHTTPPostgres(url, db string) *superstepHTTP {
	return &superstepHTTP{inner: newSuperstepPostgres(url, db, 0)}
}

func (s *superstepHTTP) name() string           { return "superstep HTTP+openai-go" }
func (s *superstepHTTP) storage() string        { return s.inner.storage() }
func (s *superstepHTTP) supports(workload) bool { return true }
func (s *superstepHTTP) pgDatabase() string     { return s.inner.pgDatabase() }

func (s *superstepHTTP) open(ctx context.Context) error {
	if err := s.inner.open(ctx); err != nil {
		return err
	}
	h, err := responses.NewHandler(s.inner.h, &responses.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return errors.Join(fmt.Errorf("bench: responses handler: %w", err), s.inner.close(ctx))
	}
	s.srv = httptest.NewServer(h)
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	s.client = openai.NewClient(option.WithBaseURL(s.srv.URL+"/v1"), option.WithAPIKey("bench"),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: tr}))
	return nil
}

func (s *superstepHTTP) close(ctx context.Context) error {
	s.srv.CloseClientConnections()
	s.srv.Close()
	return s.inner.close(ctx)
}

func (s *superstepHTTP) do(ctx context.Context, w workload, _ string) error {
	params := oresponses.ResponseNewParams{Model: modelOf(w),
		Input: oresponses.ResponseNewParamsInputUnion{OfString: openai.String(payload(payloadBytes))}}
	if w == w3Events {
		return s.stream(ctx, params)
	}
	r, err := s.client.Responses.New(ctx, params)
	if err != nil {
		return fmt.Errorf("bench: http create: %w", err)
	}
	if r.Status != oresponses.ResponseStatusCompleted {
		return fmt.Errorf("bench: http: response %s is %s", r.ID, r.Status)
	}
	return nil
}

// stream reads the whole SSE stream and checks it ended completed with
// every output item.
func (s *superstepHTTP) stream(ctx context.Context, params oresponses.ResponseNewParams) error {
	st := s.client.Responses.NewStreaming(ctx, params)
	defer st.Close()
	done, items := false, 0
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.output_item.done":
			items++
		case "response.completed":
			done = true
		}
	}
	if err := st.Err(); err != nil {
		return fmt.Errorf("bench: http stream: %w", err)
	}
	if !done || items != eventCount {
		return fmt.Errorf("bench: http stream: completed=%v with %d output items, want %d", done, items, eventCount)
	}
	return nil
}

// storeCounts reports the store calls of the last open.
func (s *superstepHTTP) storeCounts() storeCounts { return s.inner.storeCounts() }
