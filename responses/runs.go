package responses

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// The inspection API (GET /v1/runs, /v1/runs/{id}, /v1/runs/{id}/checkpoints,
// POST /v1/runs/{id}/fork): runs are shown to the owner of their
// responses; another owner's run is not found, like a missing one.

// Paging bounds of GET /v1/runs.
const (
	runsLimitDefault = 20
	runsLimitMax     = 100
)

// runSummary is a run in GET /v1/runs and GET /v1/runs/{id}.
type runSummary struct {
	ID             string      `json:"id"`
	Object         string      `json:"object"`
	Model          string      `json:"model"`
	Status         string      `json:"status"`
	Active         bool        `json:"active"`
	HeadResponseID string      `json:"head_response_id"`
	LastStep       int64       `json:"last_step"`
	CreatedAt      int64       `json:"created_at"`
	UpdatedAt      int64       `json:"updated_at"`
	Lease          runLease    `json:"lease"`
	ForkedFrom     *forkOrigin `json:"forked_from"`
	// ResumeError is why hosts failed to resume the run since its last
	// commit (null when none failed).
	ResumeError *string `json:"resume_error"`
}

type runLease struct {
	Owner     string `json:"owner"`
	Epoch     int64  `json:"epoch"`
	ExpiresAt int64  `json:"expires_at"`
}

type forkOrigin struct {
	RunID string `json:"run_id"`
	Step  int64  `json:"step"`
}

func toRunSummary(ri *store.RunInfo) runSummary {
	s := runSummary{ID: ri.ID, Object: "run", Model: ri.Model, Status: string(ri.HeadStatus), Active: ri.Active,
		HeadResponseID: ri.HeadResponseID, LastStep: ri.LastStep, CreatedAt: ri.CreatedAt.Unix(), UpdatedAt: ri.UpdatedAt.Unix(),
		Lease: runLease{Owner: ri.Lease.Owner, Epoch: ri.Lease.Epoch, ExpiresAt: unixOrZero(ri.Lease.ExpiresAt)}}
	if f := ri.ForkedFrom; f != nil {
		s.ForkedFrom = &forkOrigin{RunID: f.RunID, Step: f.Step}
	}
	if ri.Resume.Failures > 0 {
		s.ResumeError = &ri.Resume.Error
	}
	return s
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

type runList struct {
	Object  string       `json:"object"`
	Data    []runSummary `json:"data"`
	FirstID *string      `json:"first_id"`
	LastID  *string      `json:"last_id"`
	HasMore bool         `json:"has_more"`
}

// runsQuery is GET /v1/runs's query, parsed.
type runsQuery struct {
	params     store.RunQueryParams // Limit is the page size asked for
	responseID string
}

// parseRunsQuery reads the query of GET /v1/runs. Unknown parameters are
// refused, as a typo in a filter would otherwise list everything.
func parseRunsQuery(vals url.Values) (*runsQuery, error) {
	q := &runsQuery{params: store.RunQueryParams{Limit: runsLimitDefault, Desc: true}}
	for key, vs := range vals {
		if len(vs) != 1 {
			return nil, badRequest(cmp.Or(truncate(key, 64), "query"), codeInvalidValue, "Parameter '%s' is given %d times; give it once.",
				truncate(key, 64), len(vs))
		}
		v := vs[0]
		switch key {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > runsLimitMax {
				return nil, badRequest("limit", codeInvalidValue, "Invalid value for 'limit': expected an integer from 1 to %d, got '%s'.",
					runsLimitMax, truncate(v, 64))
			}
			q.params.Limit = n
		case "order":
			switch v {
			case "asc":
				q.params.Desc = false
			case "desc":
				q.params.Desc = true
			default:
				return nil, badRequest("order", codeInvalidValue, "Invalid value for 'order': expected 'asc' or 'desc', got '%s'.", truncate(v, 64))
			}
		case "after":
			if !validRunID(v) {
				return nil, badRequest("after", codeInvalidValue, "Invalid value for 'after': expected a run id (run_...), got '%s'.", truncate(v, 64))
			}
			q.params.After = v
		case "status":
			switch st := store.Status(v); {
			case v == "active" || v == "idle":
				active := v == "active"
				q.params.Active = &active
			case st.Valid():
				q.params.Status = st
			default:
				return nil, badRequest("status", codeInvalidValue,
					"Invalid value for 'status': expected active, idle, queued, in_progress, completed, failed, cancelled or incomplete, got '%s'.",
					truncate(v, 64))
			}
		case "model":
			if v == "" || len(v) > 256 || !validText(v) {
				return nil, badRequest("model", codeInvalidValue, "Invalid value for 'model': expected a model name.")
			}
			q.params.Model = v
		case "host":
			if v == "" || len(v) > 256 || !validText(v) {
				return nil, badRequest("host", codeInvalidValue, "Invalid value for 'host': expected a host id.")
			}
			q.params.LeaseOwner = v
		case "created_after", "created_before":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 1<<40 {
				return nil, badRequest(key, codeInvalidValue, "Invalid value for '%s': expected Unix seconds, got '%s'.", key, truncate(v, 64))
			}
			if key == "created_after" {
				q.params.CreatedAfter = time.Unix(n, 0)
			} else {
				q.params.CreatedBefore = time.Unix(n, 0)
			}
		case "response_id":
			if !validResponseID(v) {
				return nil, badRequest("response_id", codeInvalidValue, "Invalid value for 'response_id': expected a response id (resp_...), got '%s'.",
					truncate(v, 64))
			}
			q.responseID = v
		default:
			param := truncate(key, 64)
			if param == "" {
				param = "query" // "?=x": a parameter without a name
			}
			return nil, badRequest(param, "unknown_parameter", "Unknown parameter: '%s'.", param)
		}
	}
	return q, nil
}

// validText reports whether s is valid UTF-8 without NUL (PostgreSQL
// refuses such text with an error, a 500).
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// validRunID reports whether id can name a run: "run_" then letters,
// digits, '_' or '-' (see validResponseID).
func validRunID(id string) bool {
	const prefix = "run_"
	if len(id) <= len(prefix) || len(id) > maxIDLen || id[:len(prefix)] != prefix {
		return false
	}
	return validResponseID("resp_" + id[len(prefix):])
}

// runNotFound is the 404 for an unknown (or another owner's) run.
func runNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: fmt.Sprintf("Run with id '%s' not found.", id)}
}

// withRunID answers a route's {run_id} that cannot name a run with the
// same 404 an unknown id gets, before anything reads the store.
func (s *server) withRunID(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("run_id"); !validRunID(id) {
			s.writeError(w, r, runNotFound(truncate(id, 200)))
			return
		}
		next(w, r)
	}
}

// runError maps a host error about run id: not found names the run.
func runError(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return runNotFound(id)
	}
	if errors.Is(err, host.ErrInspectUnsupported) {
		return &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "not_supported",
			Message: "This server's store cannot list runs for inspection."}
	}
	return err
}

// handleRuns serves GET /v1/runs.
func (s *server) handleRuns(w http.ResponseWriter, r *http.Request) {
	q, err := parseRunsQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner := ownerFrom(r.Context())
	list := runList{Object: "list", Data: []runSummary{}}
	if q.responseID != "" {
		// The run holding that response: a list of at most one.
		resp, err := s.host.Get(r.Context(), q.responseID, owner)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.writeError(w, r, err)
			return
		}
		if err == nil {
			ri, err := s.host.Run(r.Context(), resp.RunID, owner)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				s.writeError(w, r, runError(err, resp.RunID))
				return
			}
			if err == nil && matches(ri, &q.params) {
				list.Data = append(list.Data, toRunSummary(ri))
			}
		}
	} else {
		p := q.params
		p.Owner = owner
		if p.After != "" {
			// A cursor must be a run this key can see: another owner's
			// is refused like a missing one, telling nothing of it.
			if _, err := s.host.Run(r.Context(), p.After, owner); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					err = badRequest("after", codeInvalidValue, "Invalid value for 'after': run '%s' not found.", p.After)
				}
				s.writeError(w, r, runError(err, p.After))
				return
			}
		}
		p.Limit++ // one more tells has_more
		runs, err := s.host.Runs(r.Context(), &p)
		if err != nil {
			s.writeError(w, r, runError(err, ""))
			return
		}
		if len(runs) > q.params.Limit {
			runs, list.HasMore = runs[:q.params.Limit], true
		}
		for _, ri := range runs {
			list.Data = append(list.Data, toRunSummary(ri))
		}
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, list)
}

// matches reports whether ri passes p's filters (for response_id, which
// finds its run directly).
func matches(ri *store.RunInfo, p *store.RunQueryParams) bool {
	switch {
	case p.Model != "" && ri.Model != p.Model,
		p.Status != "" && ri.HeadStatus != p.Status,
		p.Active != nil && ri.Active != *p.Active,
		p.LeaseOwner != "" && ri.Lease.Owner != p.LeaseOwner,
		!p.CreatedAfter.IsZero() && !ri.CreatedAt.After(p.CreatedAfter),
		!p.CreatedBefore.IsZero() && !ri.CreatedAt.Before(p.CreatedBefore):
		return false
	}
	return true
}

// runDetail is GET /v1/runs/{run_id}.
type runDetail struct {
	runSummary
	Responses       []runResponse    `json:"responses"`
	Supersteps      []superstepView  `json:"supersteps"`
	PendingRequests []pendingRequest `json:"pending_requests"`
	Graph           *graphView       `json:"graph"`
	// LeaseHistory lists every claim of the run's lease, oldest first:
	// its owners and takeovers.
	LeaseHistory []leaseClaim `json:"lease_history"`
}

type leaseClaim struct {
	Epoch     int64  `json:"epoch"`
	Owner     string `json:"owner"`
	LastStep  int64  `json:"last_step"`
	ClaimedAt int64  `json:"claimed_at"`
}

type runResponse struct {
	ID                 string  `json:"id"`
	Status             string  `json:"status"`
	StartStep          int64   `json:"start_step"`
	CommitStep         int64   `json:"commit_step"`
	PreviousResponseID *string `json:"previous_response_id"`
	NextSeq            int64   `json:"next_seq"`
	Publication        string  `json:"publication"`
	CreatedAt          int64   `json:"created_at"`
	CompletedAt        *int64  `json:"completed_at"`
}

type superstepView struct {
	Step        int64    `json:"step"`
	CommittedAt *int64   `json:"committed_at"`
	ResponseID  string   `json:"response_id"`
	FirstSeq    *int64   `json:"first_seq"`
	LastSeq     *int64   `json:"last_seq"`
	Executors   []string `json:"executors"`
	// Epoch and Host are the lease the step was committed under (null
	// when no claim is recorded: see host.Superstep).
	Epoch *int64  `json:"epoch"`
	Host  *string `json:"host"`
}

type pendingRequest struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type graphView struct {
	Start     string         `json:"start"`
	Executors []graphExec    `json:"executors"`
	Edges     []graphEdgeOut `json:"edges"`
}

type graphExec struct {
	ID     string `json:"id"`
	Output bool   `json:"output"`
}

type graphEdgeOut struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

// handleRun serves GET /v1/runs/{run_id}.
func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run_id")
	d, err := s.host.RunDetail(r.Context(), id, ownerFrom(r.Context()))
	if err != nil {
		s.writeError(w, r, runError(err, id))
		return
	}
	out := runDetail{runSummary: toRunSummary(d.Info), Responses: make([]runResponse, 0, len(d.Responses)),
		Supersteps: make([]superstepView, 0, len(d.Supersteps)), PendingRequests: make([]pendingRequest, 0, len(d.Pending))}
	for _, resp := range d.Responses {
		rr := runResponse{ID: resp.ID, Status: string(resp.Status), StartStep: resp.StartStep, CommitStep: resp.CommitStep,
			NextSeq: resp.NextSeq, Publication: resp.Publication, CreatedAt: resp.CreatedAt.Unix()}
		if resp.PreviousResponseID != "" {
			rr.PreviousResponseID = &resp.PreviousResponseID
		}
		if resp.CompletedAt != nil {
			t := resp.CompletedAt.Unix()
			rr.CompletedAt = &t
		}
		out.Responses = append(out.Responses, rr)
	}
	for _, ss := range d.Supersteps {
		v := superstepView{Step: ss.Step, ResponseID: ss.ResponseID, Executors: ss.Executors}
		if ss.CommittedAt != nil {
			t := ss.CommittedAt.Unix()
			v.CommittedAt = &t
		}
		if ss.Epoch > 0 {
			epoch, hostID := ss.Epoch, ss.Host
			v.Epoch, v.Host = &epoch, &hostID
		}
		if ss.FirstSeq >= 0 {
			first, last := ss.FirstSeq, ss.LastSeq
			v.FirstSeq, v.LastSeq = &first, &last
		}
		out.Supersteps = append(out.Supersteps, v)
	}
	for _, p := range d.Pending {
		out.PendingRequests = append(out.PendingRequests, pendingRequest{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments})
	}
	out.LeaseHistory = make([]leaseClaim, 0, len(d.Claims))
	for _, c := range d.Claims {
		out.LeaseHistory = append(out.LeaseHistory, leaseClaim{Epoch: c.Epoch, Owner: c.Owner, LastStep: c.LastStep, ClaimedAt: c.ClaimedAt.Unix()})
	}
	if g := d.Graph; g != nil {
		gv := &graphView{Start: g.Start, Executors: make([]graphExec, 0, len(g.Executors)), Edges: make([]graphEdgeOut, 0, len(g.Edges))}
		for _, e := range g.Executors {
			gv.Executors = append(gv.Executors, graphExec{ID: e.ID, Output: e.Output})
		}
		for _, e := range g.Edges {
			gv.Edges = append(gv.Edges, graphEdgeOut{From: e.From, To: e.To, Kind: e.Kind})
		}
		out.Graph = gv
	}
	writeJSON(w, http.StatusOK, out)
}

type checkpointList struct {
	Object  string           `json:"object"`
	Data    []checkpointView `json:"data"`
	HasMore bool             `json:"has_more"`
}

type checkpointView struct {
	Step       int64      `json:"step"`
	ParentStep int64      `json:"parent_step"`
	Size       int64      `json:"size"`
	CreatedAt  int64      `json:"created_at"`
	Parts      []partView `json:"parts"`
}

type partView struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Changed bool   `json:"changed"`
	// With ?include=data: the part's bytes as text when they are valid
	// UTF-8 (the workflow's parts are JSON), else as base64, at most
	// partDataMax bytes of them (Truncated then).
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
	Truncated  bool    `json:"truncated,omitempty"`
}

// partDataMax caps the bytes of one part a checkpoint listing carries.
const partDataMax = 64 << 10

// withData sets v's data from b, capped at partDataMax (cut at a rune
// boundary).
func (v *partView) withData(b []byte) {
	if len(b) > partDataMax {
		b, v.Truncated = trimPartialRune(b[:partDataMax]), true
	}
	if utf8.Valid(b) {
		s := string(b)
		v.Data = &s
		return
	}
	s := base64.StdEncoding.EncodeToString(b)
	v.DataBase64 = &s
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.Valid(b[:len(b)-i]) {
			return b[:len(b)-i]
		}
	}
	return b
}

// handleCheckpoints serves GET /v1/runs/{run_id}/checkpoints.
func (s *server) handleCheckpoints(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run_id")
	data := false
	for key, vs := range r.URL.Query() {
		switch {
		case (key == "include" || key == "include[]") && len(vs) == 1 && vs[0] == "data":
			data = true
		default:
			s.writeError(w, r, badRequest(cmp.Or(truncate(key, 64), "query"), "unknown_parameter",
				"Unknown parameter or value: '%s' (this route takes include=data).", truncate(key, 64)))
			return
		}
	}
	cps, err := s.host.RunCheckpoints(r.Context(), id, ownerFrom(r.Context()), data)
	if err != nil {
		s.writeError(w, r, runError(err, id))
		return
	}
	out := checkpointList{Object: "list", Data: make([]checkpointView, 0, len(cps))}
	for _, c := range cps {
		v := checkpointView{Step: c.Step, ParentStep: c.ParentStep, Size: c.Size, CreatedAt: c.CreatedAt.Unix(),
			Parts: make([]partView, 0, len(c.Parts))}
		for _, p := range c.Parts {
			pv := partView{Name: p.Name, Size: p.Size, Changed: p.Changed}
			if data {
				pv.withData(p.Data)
			}
			v.Parts = append(v.Parts, pv)
		}
		out.Data = append(out.Data, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// parseFork reads a fork body with the Responses API's request readers
// (protocol.ParseFork): what a create refuses, a fork refuses too.
func parseFork(body []byte, maxInputItems int) (*host.ForkParams, error) {
	req, err := protocol.ParseFork(body, maxInputItems)
	if err != nil {
		return nil, requestError(err)
	}
	return &host.ForkParams{Step: req.Step, Input: req.Input, Stream: req.Stream, Background: req.Background,
		Metadata: req.Metadata}, nil
}

// handleFork serves POST /v1/runs/{run_id}/fork: it replies as POST
// /v1/responses does for the fork's first response (SSE with stream, the
// created Response with background, the final one otherwise).
func (s *server) handleFork(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run_id")
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := parseFork(body, s.opts.MaxInputItems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.RunID, p.Owner = id, ownerFrom(r.Context())
	if p.Stream {
		release, ok := s.acquireStream(w, r)
		if !ok {
			return
		}
		defer release()
	}
	ctx, cancel := s.storeContext(r)
	resp, err := s.host.Fork(ctx, p)
	cancel()
	if err != nil {
		s.writeError(w, r, runError(err, id))
		return
	}
	s.replyStarted(w, r, resp, p.Owner, p.Stream, p.Background)
}
