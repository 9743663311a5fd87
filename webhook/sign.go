package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks specification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// secretPrefix starts a secret in its Standard Webhooks form.
const secretPrefix = "whsec_"

// ToleranceDefault is how far a webhook-timestamp may be from the
// receiver's clock (Verifier.Tolerance): a replayed request older than
// that is refused.
const ToleranceDefault = 5 * time.Minute

// Errors of Verify.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or
	// webhook-signature is absent.
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrTimestamp: webhook-timestamp is not a Unix time within the
	// tolerance of now.
	ErrTimestamp = errors.New("webhook: webhook-timestamp too old, too new or invalid")
	// ErrSignature: no v1 signature of the header matches.
	ErrSignature = errors.New("webhook: no matching signature")
)

// Secret is a signing key.
type Secret struct{ key []byte }

// ParseSecret reads a secret in its Standard Webhooks form, "whsec_"
// followed by the key's bytes in standard base64. The prefix is required,
// so that a secret of another kind pasted by mistake is refused.
func ParseSecret(s string) (*Secret, error) {
	s = strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, fmt.Errorf("webhook: a secret starts with %q", secretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("webhook: secret: the part after %q is not base64: %w", secretPrefix, err)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("webhook: secret: %d bytes of key, want at least 16", len(key))
	}
	return &Secret{key: key}, nil
}

// NewSecret returns a fresh random secret (24 bytes) in its "whsec_" form.
func NewSecret() string {
	key := make([]byte, 24)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the webhook-signature value for a request: "v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body".
func (s *Secret) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(s.mac(id, ts.Unix(), body))
}

func (s *Secret) mac(id string, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SetHeaders sets the three signature headers of a request with body,
// made at ts.
func (s *Secret) SetHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, s.Sign(id, ts, body))
}

// Verifier checks the signature headers of webhook requests.
type Verifier struct {
	secret *Secret
	// Tolerance is how far the webhook-timestamp may be from Now, either
	// way; zero means ToleranceDefault.
	Tolerance time.Duration
	// Now is the receiver's clock; nil means time.Now.
	Now func() time.Time
}

// NewVerifier returns a Verifier for a secret in its "whsec_" form.
func NewVerifier(secret string) (*Verifier, error) {
	s, err := ParseSecret(secret)
	if err != nil {
		return nil, err
	}
	return &Verifier{secret: s}, nil
}

// Verify checks that body and h come from a holder of the secret and that
// the request was made within the tolerance of now: one of the
// space-separated signatures of webhook-signature is the "v1" one of
// webhook-id, webhook-timestamp and body (compared in constant time).
// Errors: ErrMissingHeaders, ErrTimestamp, ErrSignature. Verify the raw
// body as received, before any JSON decoding.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	now, tol := time.Now(), v.Tolerance
	if v.Now != nil {
		now = v.Now()
	}
	if tol <= 0 {
		tol = ToleranceDefault
	}
	if t := time.Unix(ts, 0); t.Before(now.Add(-tol)) || t.After(now.Add(tol)) {
		return ErrTimestamp
	}
	want := v.secret.mac(id, ts, body)
	for sig := range strings.FieldsSeq(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignature
}
