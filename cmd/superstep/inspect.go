package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/superstep/superstep/protocol"
)

// The inspection commands: runs, show, events, checkpoints, fork, cancel.
// They read a running server's inspection API (GET /v1/runs...) and
// Responses API, with --addr and --api-key, and print tables or, with
// --json, the server's JSON.

// runView is a run as GET /v1/runs and GET /v1/runs/{id} show it.
type runView struct {
	ID             string `json:"id"`
	Model          string `json:"model"`
	Status         string `json:"status"`
	Active         bool   `json:"active"`
	HeadResponseID string `json:"head_response_id"`
	LastStep       int64  `json:"last_step"`
	CreatedAt      int64  `json:"created_at"`
	UpdatedAt      int64  `json:"updated_at"`
	Lease          struct {
		Owner     string `json:"owner"`
		Epoch     int64  `json:"epoch"`
		ExpiresAt int64  `json:"expires_at"`
	} `json:"lease"`
	ForkedFrom *struct {
		RunID string `json:"run_id"`
		Step  int64  `json:"step"`
	} `json:"forked_from"`
	ResumeError *string `json:"resume_error"`
	Responses   []struct {
		ID                 string  `json:"id"`
		Status             string  `json:"status"`
		StartStep          int64   `json:"start_step"`
		CommitStep         int64   `json:"commit_step"`
		PreviousResponseID *string `json:"previous_response_id"`
		NextSeq            int64   `json:"next_seq"`
		CreatedAt          int64   `json:"created_at"`
		CompletedAt        *int64  `json:"completed_at"`
	} `json:"responses"`
	Supersteps []struct {
		Step        int64    `json:"step"`
		CommittedAt *int64   `json:"committed_at"`
		ResponseID  string   `json:"response_id"`
		FirstSeq    *int64   `json:"first_seq"`
		LastSeq     *int64   `json:"last_seq"`
		Executors   []string `json:"executors"`
		Epoch       *int64   `json:"epoch"`
		Host        *string  `json:"host"`
	} `json:"supersteps"`
	LeaseHistory []struct {
		Epoch     int64  `json:"epoch"`
		Owner     string `json:"owner"`
		LastStep  int64  `json:"last_step"`
		ClaimedAt int64  `json:"claimed_at"`
	} `json:"lease_history"`
	PendingRequests []struct {
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"pending_requests"`
	Graph *struct {
		Start     string `json:"start"`
		Executors []struct {
			ID string `json:"id"`
		} `json:"executors"`
		Edges []struct {
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"edges"`
	} `json:"graph"`
}

// unixTime formats Unix seconds for tables ("-" for none).
func unixTime(s int64) string {
	if s == 0 {
		return "-"
	}
	return time.Unix(s, 0).UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newCommand returns a flag set for an inspection command with the client
// flags registered.
func newCommand(name string, stderr io.Writer, cf *clientFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf.register(fs)
	return fs
}

// parseArgs parses args allowing flags after the positional arguments
// (`show resp_1 --json`) and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, withCode(exitUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// oneArg requires exactly one positional argument.
func oneArg(cmd, what string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", withCode(exitUsage, fmt.Errorf("%s: want one %s, got %d arguments", cmd, what, len(pos)))
	}
	return pos[0], nil
}

// runRuns implements `superstep runs`.
func runRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newCommand("runs", stderr, &cf)
	limit := fs.Int("limit", 20, "runs per page (1..100)")
	status := fs.String("status", "", "only runs whose head has this status, or active / idle")
	model := fs.String("model", "", "only runs of this model")
	after := fs.String("after", "", "the page after this run id")
	order := fs.String("order", "desc", "desc (newest first) or asc")
	if pos, err := parseArgs(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return withCode(exitUsage, fmt.Errorf("runs: unexpected argument %q", pos[0]))
	}
	q := url.Values{}
	q.Set("limit", strconv.Itoa(*limit))
	q.Set("order", *order)
	for k, v := range map[string]string{"status": *status, "model": *model, "after": *after} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var list struct {
		Data    []runView `json:"data"`
		HasMore bool      `json:"has_more"`
		LastID  *string   `json:"last_id"`
	}
	body, err := cf.client().call(ctx, "GET", "/v1/runs?"+q.Encode(), nil, &list)
	if err != nil {
		return commandError("runs", err)
	}
	if cf.json {
		return writeJSONBody(stdout, body)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tMODEL\tSTATUS\tSTEP\tLEASE\tCREATED\tHEAD RESPONSE\tFORKED FROM")
	for _, r := range list.Data {
		fork := "-"
		if r.ForkedFrom != nil {
			fork = fmt.Sprintf("%s@%d", r.ForkedFrom.RunID, r.ForkedFrom.Step)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Model, r.Status, r.LastStep, lease(&r),
			unixTime(r.CreatedAt), r.HeadResponseID, fork)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if list.HasMore && list.LastID != nil {
		fmt.Fprintf(stdout, "(more: superstep runs --after %s)\n", *list.LastID)
	}
	return nil
}

// lease formats a run's lease: owner#epoch, or "-#epoch" when unowned.
func lease(r *runView) string {
	return fmt.Sprintf("%s#%d", orDash(r.Lease.Owner), r.Lease.Epoch)
}

// runOf returns the run id of id, a run id or a response id.
func runOf(ctx context.Context, c *apiClient, id string) (string, error) {
	if strings.HasPrefix(id, "run_") {
		return id, nil
	}
	if !strings.HasPrefix(id, "resp_") {
		return "", withCode(exitUsage, fmt.Errorf("%q is neither a run id (run_...) nor a response id (resp_...)", id))
	}
	var list struct {
		Data []runView `json:"data"`
	}
	if _, err := c.call(ctx, "GET", "/v1/runs?response_id="+url.QueryEscape(id), nil, &list); err != nil {
		return "", err
	}
	if len(list.Data) == 0 {
		return "", &apiError{Status: 404, Code: "not_found", Message: fmt.Sprintf("Response with id '%s' not found.", id)}
	}
	return list.Data[0].ID, nil
}

// runShow implements `superstep show <response or run id>`: the run as a
// readable timeline.
func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newCommand("show", stderr, &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	id, err := oneArg("show", "response or run id", pos)
	if err != nil {
		return err
	}
	c := cf.client()
	runID, err := runOf(ctx, c, id)
	if err != nil {
		return commandError("show", err)
	}
	var r runView
	body, err := c.call(ctx, "GET", "/v1/runs/"+url.PathEscape(runID), nil, &r)
	if err != nil {
		return commandError("show", err)
	}
	if cf.json {
		return writeJSONBody(stdout, body)
	}
	printRun(stdout, &r)
	return nil
}

// printRun prints a run's header, responses, graph, timeline and pending
// requests.
func printRun(w io.Writer, r *runView) {
	fmt.Fprintf(w, "run %s  model %s  status %s  step %d\n", r.ID, r.Model, r.Status, r.LastStep)
	fmt.Fprintf(w, "created %s  updated %s\n", unixTime(r.CreatedAt), unixTime(r.UpdatedAt))
	fmt.Fprintf(w, "lease %s epoch %d", orDash(r.Lease.Owner), r.Lease.Epoch)
	if r.Lease.Owner != "" {
		fmt.Fprintf(w, " expires %s", unixTime(r.Lease.ExpiresAt))
	}
	fmt.Fprintln(w)
	if r.ForkedFrom != nil {
		fmt.Fprintf(w, "forked from %s at step %d\n", r.ForkedFrom.RunID, r.ForkedFrom.Step)
	}
	if r.ResumeError != nil {
		fmt.Fprintf(w, "resume failing: %s\n", *r.ResumeError)
	}
	if g := r.Graph; g != nil {
		var edges []string
		for _, e := range g.Edges {
			edges = append(edges, e.From+"->"+e.To)
		}
		fmt.Fprintf(w, "graph start %s  edges %s\n", g.Start, orDash(strings.Join(edges, " ")))
	}
	fmt.Fprintln(w, "\nresponses:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RESPONSE\tSTATUS\tSTEPS\tEVENTS\tCREATED\tCOMPLETED")
	for _, resp := range r.Responses {
		done := "-"
		if resp.CompletedAt != nil {
			done = unixTime(*resp.CompletedAt)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d..%d\t%d\t%s\t%s\n", resp.ID, resp.Status, resp.StartStep+1, resp.CommitStep,
			resp.NextSeq, unixTime(resp.CreatedAt), done)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\ntimeline:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tCOMMITTED\tRESPONSE\tEVENTS\tEXECUTORS\tLEASE")
	for _, s := range r.Supersteps {
		at, evs, by := "-", "-", "-"
		if s.CommittedAt != nil {
			at = unixTime(*s.CommittedAt)
		}
		if s.FirstSeq != nil && s.LastSeq != nil {
			evs = fmt.Sprintf("%d..%d", *s.FirstSeq, *s.LastSeq)
		}
		if s.Epoch != nil && s.Host != nil {
			by = fmt.Sprintf("%s#%d", *s.Host, *s.Epoch)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", s.Step, at, s.ResponseID, evs, orDash(strings.Join(s.Executors, ",")), by)
	}
	_ = tw.Flush()
	if len(r.LeaseHistory) > 1 {
		fmt.Fprintln(w, "\nlease claims (takeovers):")
		for _, c := range r.LeaseHistory {
			fmt.Fprintf(w, "  epoch %d  %s  after step %d  at %s\n", c.Epoch, c.Owner, c.LastStep, unixTime(c.ClaimedAt))
		}
	}
	if len(r.PendingRequests) > 0 {
		fmt.Fprintln(w, "\npending requests:")
		for _, p := range r.PendingRequests {
			fmt.Fprintf(w, "  %s %s %s\n", p.CallID, p.Name, p.Arguments)
		}
	}
}

// runCheckpoints implements `superstep checkpoints <run id>`.
func runCheckpoints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newCommand("checkpoints", stderr, &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	id, err := oneArg("checkpoints", "run or response id", pos)
	if err != nil {
		return err
	}
	c := cf.client()
	runID, err := runOf(ctx, c, id)
	if err != nil {
		return commandError("checkpoints", err)
	}
	var list struct {
		Data []struct {
			Step       int64 `json:"step"`
			ParentStep int64 `json:"parent_step"`
			Size       int64 `json:"size"`
			CreatedAt  int64 `json:"created_at"`
			Parts      []struct {
				Name    string `json:"name"`
				Size    int64  `json:"size"`
				Changed bool   `json:"changed"`
			} `json:"parts"`
		} `json:"data"`
	}
	body, err := c.call(ctx, "GET", "/v1/runs/"+url.PathEscape(runID)+"/checkpoints", nil, &list)
	if err != nil {
		return commandError("checkpoints", err)
	}
	if cf.json {
		return writeJSONBody(stdout, body)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tPARENT\tSIZE\tCREATED\tPARTS (* changed)")
	for _, cp := range list.Data {
		var parts []string
		for _, p := range cp.Parts {
			mark := ""
			if p.Changed {
				mark = "*"
			}
			parts = append(parts, fmt.Sprintf("%s%s:%d", mark, p.Name, p.Size))
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\n", cp.Step, cp.ParentStep, cp.Size, unixTime(cp.CreatedAt), strings.Join(parts, " "))
	}
	return tw.Flush()
}

// responseView is the part of a Response object the commands print.
type responseView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output []struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		CallID  string `json:"call_id"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

// printResponse prints a Response's id, status and output.
func printResponse(w io.Writer, body []byte) error {
	var r responseView
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	fmt.Fprintf(w, "%s %s\n", r.ID, r.Status)
	for _, o := range r.Output {
		switch o.Type {
		case "message":
			for _, c := range o.Content {
				fmt.Fprintf(w, "  %s\n", c.Text)
			}
		case "function_call":
			fmt.Fprintf(w, "  function_call %s %s\n", o.Name, o.CallID)
		}
	}
	return nil
}

// runFork implements `superstep fork <run id> --step N`.
func runFork(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newCommand("fork", stderr, &cf)
	step := fs.Int64("step", -1, "the step whose checkpoint the fork starts from (required)")
	input := fs.String("input", "", "input for the fork: text, or a JSON array of input items (function_call_output answers)")
	background := fs.Bool("background", false, "return once the fork is created, without waiting for its end")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	id, err := oneArg("fork", "run or response id", pos)
	if err != nil {
		return err
	}
	if *step < 0 {
		return withCode(exitUsage, errors.New("fork: --step is required (a step >= 0; superstep checkpoints lists them)"))
	}
	c := cf.client()
	runID, err := runOf(ctx, c, id)
	if err != nil {
		return commandError("fork", err)
	}
	req := map[string]any{"step": *step, "background": *background}
	if *input != "" {
		if strings.HasPrefix(strings.TrimSpace(*input), "[") {
			req["input"] = json.RawMessage(*input)
		} else {
			req["input"] = *input
		}
	}
	body, err := c.call(ctx, "POST", "/v1/runs/"+url.PathEscape(runID)+"/fork", req, nil)
	if err != nil {
		return commandError("fork", err)
	}
	if cf.json {
		return writeJSONBody(stdout, body)
	}
	return printResponse(stdout, body)
}

// runCancel implements `superstep cancel <response id>`.
func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newCommand("cancel", stderr, &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	id, err := oneArg("cancel", "response id", pos)
	if err != nil {
		return err
	}
	body, err := cf.client().call(ctx, "POST", "/v1/responses/"+url.PathEscape(id)+"/cancel", nil, nil)
	if err != nil {
		return commandError("cancel", err)
	}
	if cf.json {
		return writeJSONBody(stdout, body)
	}
	return printResponse(stdout, body)
}

// runEvents implements `superstep events <response id> [--from N]
// [--follow]`: the response's events after sequence N. Without --follow
// they are read as JSON pages (GET /v1/responses/{id}/events) up to the
// last one logged now; with --follow from its stream (GET
// /v1/responses/{id}?stream=true&starting_after=N) until its terminal
// event, or, for a response created without stream, by polling the pages.
func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newCommand("events", stderr, &cf)
	from := fs.Int64("from", -1, "print the events after this sequence number (-1: from the first)")
	follow := fs.Bool("follow", false, "keep reading until the response's terminal event")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	id, err := oneArg("events", "response id", pos)
	if err != nil {
		return err
	}
	c := cf.client()
	// Fixed columns, not a tabwriter: with --follow each line is printed
	// as its event comes.
	const row = "%-5v  %-38s  %s\n"
	if !cf.json {
		fmt.Fprintf(stdout, row, "SEQ", "TYPE", "DETAIL")
	}
	print := func(data []byte) (terminal bool, err error) {
		var ev struct {
			Type  string `json:"type"`
			Seq   int64  `json:"sequence_number"`
			Delta string `json:"delta"`
			Item  *struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"item"`
			Response *struct {
				Status string `json:"status"`
			} `json:"response"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return false, fmt.Errorf("decode %q: %w", data, err)
		}
		if cf.json {
			fmt.Fprintf(stdout, "%s\n", data)
		} else {
			detail := ""
			switch {
			case ev.Delta != "":
				detail = strconv.Quote(ev.Delta)
			case ev.Item != nil:
				detail = ev.Item.Type + " " + ev.Item.ID
			case ev.Response != nil:
				detail = ev.Response.Status
			}
			fmt.Fprintf(stdout, row, ev.Seq, ev.Type, detail)
		}
		return protocol.IsTerminal(ev.Type), nil
	}
	if !*follow {
		_, err := pageEvents(ctx, c, id, *from, print)
		return commandError("events", err)
	}
	resp, err := c.open(ctx, "GET", fmt.Sprintf("/v1/responses/%s?stream=true&starting_after=%d", url.PathEscape(id), *from), nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == 400 {
		return commandError("events", pollEvents(ctx, c, id, *from, print)) // not created with stream
	}
	if err != nil {
		return commandError("events", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break // the stream's end marker after the terminal event
		}
		if terminal, err := print([]byte(data)); err != nil || terminal {
			return commandError("events", err)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}

// eventsRead is how far pageEvents read: the last sequence number printed
// and whether the terminal event was among them.
type eventsRead struct {
	last     int64
	terminal bool
}

// pageEvents prints the response's logged events after `after`, page by
// page.
func pageEvents(ctx context.Context, c *apiClient, id string, after int64, print func([]byte) (bool, error)) (eventsRead, error) {
	out := eventsRead{last: after}
	for {
		var page struct {
			Data []struct {
				Seq   int64           `json:"sequence_number"`
				Event json.RawMessage `json:"event"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		path := fmt.Sprintf("/v1/responses/%s/events?after=%d&limit=1000", url.PathEscape(id), out.last)
		if _, err := c.call(ctx, "GET", path, nil, &page); err != nil {
			return out, err
		}
		for _, ev := range page.Data {
			terminal, err := print(ev.Event)
			if err != nil {
				return out, err
			}
			out.last, out.terminal = ev.Seq, out.terminal || terminal
		}
		if !page.HasMore || len(page.Data) == 0 {
			return out, nil
		}
	}
}

// pollEvents follows a response that cannot be streamed by reading its
// pages every 200 ms until its terminal event.
func pollEvents(ctx context.Context, c *apiClient, id string, after int64, print func([]byte) (bool, error)) error {
	for {
		got, err := pageEvents(ctx, c, id, after, print)
		if err != nil || got.terminal {
			return err
		}
		after = got.last
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// inspectCommands are the inspection commands by name.
var inspectCommands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"runs": runRuns, "show": runShow, "events": runEvents, "checkpoints": runCheckpoints, "fork": runFork, "cancel": runCancel,
}
