package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/superstep/superstep/store"
)

// IdempotencyError is a create whose idempotency key the same owner used,
// within store.IdempotencyWindow, for a different request (HTTP 422).
// Nothing is stored when Create returns it.
type IdempotencyError struct {
	Key        string
	ResponseID string // the response the key's first request created
}

func (e *IdempotencyError) Error() string {
	return fmt.Sprintf("host: idempotency key %q was used for a different request (response %s)", e.Key, e.ResponseID)
}

// checkIdempotencyKey refuses a key the store cannot record: over
// store.IdempotencyKeyMax bytes, not UTF-8, or with control characters.
func checkIdempotencyKey(key string) error {
	switch {
	case len(key) > store.IdempotencyKeyMax:
		return &InputError{Code: "invalid_idempotency_key", Message: fmt.Sprintf(
			"the idempotency key is %d bytes long; the limit is %d bytes", len(key), store.IdempotencyKeyMax)}
	case !utf8.ValidString(key) || strings.ContainsFunc(key, unicode.IsControl):
		return &InputError{Code: "invalid_idempotency_key",
			Message: "the idempotency key must be UTF-8 text without control characters"}
	}
	return nil
}

// requestHash identifies the request a key came with: the SHA-256 of the
// request as stored (the body as received; a library caller's is built
// from CreateParams, deterministically).
func requestHash(request []byte) string {
	sum := sha256.Sum256(request)
	return hex.EncodeToString(sum[:])
}

// replay returns the response p's idempotency key already created, nil
// when the key is not recorded (or its response is gone), or an
// *IdempotencyError when the key came with a different request. It runs
// before the work of a create; a create racing with another of the same
// key learns of it from ResponseCreate instead (createAndStart), which is
// also all a store without store.IdempotencyKeyReader gives (a wrapper):
// then a retried continuation is refused as a conflict, not replayed.
func (h *Host) replay(ctx context.Context, p *CreateParams) (*store.Response, error) {
	kr, ok := h.store.(store.IdempotencyKeyReader)
	if !ok {
		return nil, nil
	}
	rec, err := kr.IdempotencyKeyGet(ctx, &store.IdempotencyKeyGetParams{Owner: p.Owner, Key: p.IdempotencyKey})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host: read idempotency key: %w", err)
	}
	return h.replayRecord(ctx, p, rec)
}

// replayRecord returns the response of rec, the record of p's key, as the
// reply to p; nil when that response was deleted since (its record went
// with it: the key is free).
func (h *Host) replayRecord(ctx context.Context, p *CreateParams, rec *store.IdempotencyRecord) (*store.Response, error) {
	if rec.RequestHash != requestHash(p.Request) {
		return nil, &IdempotencyError{Key: p.IdempotencyKey, ResponseID: rec.ResponseID}
	}
	resp, err := h.get(ctx, rec.ResponseID, p.Owner)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host: replay response %s of idempotency key: %w", rec.ResponseID, err)
	}
	h.log.Info("host: create replayed: idempotency key seen before", "response_id", resp.ID)
	return resp, nil
}

// replayRaced answers a create that ResponseCreate refused because a
// concurrent create with the same key committed first.
func (h *Host) replayRaced(ctx context.Context, p *CreateParams, ie *store.IdempotencyError) (*store.Response, error) {
	resp, err := h.replayRecord(ctx, p, &ie.Record)
	if err == nil && resp == nil {
		return nil, &ConflictError{Message: fmt.Sprintf(
			"Response %s, created with this idempotency key, was deleted while this request was served; retry.",
			ie.Record.ResponseID)}
	}
	return resp, err
}

// keyHash is the RequestHash recorded with p's key ("" without a key).
func keyHash(p *CreateParams) string {
	if p.IdempotencyKey == "" {
		return ""
	}
	return requestHash(p.Request)
}
