package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/webhook"
)

// The Standard Webhooks specification's test vector (its reference
// libraries' TestWebhookSign).
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSecret_Sign_StandardWebhooksVector(t *testing.T) {
	t.Parallel()
	s, err := webhook.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Sign(vectorID, time.Unix(vectorTS, 0), []byte(vectorBody)); got != vectorSig {
		t.Fatalf("Sign = %s, want %s", got, vectorSig)
	}
}

func TestParseSecret_Refuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := webhook.ParseSecret(s); err == nil {
			t.Errorf("ParseSecret(%q) succeeded", s)
		}
	}
	if _, err := webhook.ParseSecret(webhook.NewSecret()); err != nil {
		t.Fatalf("ParseSecret(NewSecret()): %v", err)
	}
}

func vectorHeader() http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, vectorID)
	h.Set(webhook.HeaderTimestamp, strconv.Itoa(vectorTS))
	h.Set(webhook.HeaderSignature, vectorSig)
	return h
}

func TestVerifier_Verify(t *testing.T) {
	t.Parallel()
	at := time.Unix(vectorTS, 0)
	for _, c := range []struct {
		name   string
		secret string
		edit   func(h http.Header)
		body   string
		now    time.Time
		want   error
	}{
		{name: "Valid", now: at},
		{name: "ValidWithinTolerance", now: at.Add(webhook.ToleranceDefault - time.Second)},
		{name: "ValidAmongOthers", now: at, edit: func(h http.Header) {
			h.Set(webhook.HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,xx "+vectorSig)
		}},
		{name: "OtherVersionOnly", now: at, want: webhook.ErrSignature, edit: func(h http.Header) {
			h.Set(webhook.HeaderSignature, "v2,"+strings.TrimPrefix(vectorSig, "v1,"))
		}},
		{name: "TamperedBody", now: at, body: `{"test": 2432232315}`, want: webhook.ErrSignature},
		{name: "OtherID", now: at, want: webhook.ErrSignature, edit: func(h http.Header) { h.Set(webhook.HeaderID, "msg_other") }},
		{name: "WrongSecret", now: at, secret: "whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", want: webhook.ErrSignature},
		{name: "TooOld", now: at.Add(webhook.ToleranceDefault + time.Second), want: webhook.ErrTimestamp},
		{name: "TooNew", now: at.Add(-webhook.ToleranceDefault - time.Second), want: webhook.ErrTimestamp},
		{name: "BadTimestamp", now: at, want: webhook.ErrTimestamp, edit: func(h http.Header) { h.Set(webhook.HeaderTimestamp, "soon") }},
		{name: "NoSignature", now: at, want: webhook.ErrMissingHeaders, edit: func(h http.Header) { h.Del(webhook.HeaderSignature) }},
		{name: "NoID", now: at, want: webhook.ErrMissingHeaders, edit: func(h http.Header) { h.Del(webhook.HeaderID) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			secret := vectorSecret
			if c.secret != "" {
				secret = c.secret
			}
			v, err := webhook.NewVerifier(secret)
			if err != nil {
				t.Fatal(err)
			}
			v.Now = func() time.Time { return c.now }
			h := vectorHeader()
			if c.edit != nil {
				c.edit(h)
			}
			body := vectorBody
			if c.body != "" {
				body = c.body
			}
			if err := v.Verify(h, []byte(body)); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

// TestSecret_SetHeaders_RoundTrip: what a Secret sets, a Verifier of the
// same secret accepts, with a custom tolerance.
func TestSecret_SetHeaders_RoundTrip(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	s, _ := webhook.ParseSecret(secret)
	v, _ := webhook.NewVerifier(secret)
	v.Tolerance = time.Second
	h := http.Header{}
	s.SetHeaders(h, "evt_1", time.Now(), []byte(`{}`))
	if err := v.Verify(h, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	s.SetHeaders(h, "evt_1", time.Now().Add(-3*time.Second), []byte(`{}`))
	if err := v.Verify(h, []byte(`{}`)); !errors.Is(err, webhook.ErrTimestamp) {
		t.Fatalf("Verify of a request older than the tolerance = %v, want ErrTimestamp", err)
	}
}
