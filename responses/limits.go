package responses

import (
	"fmt"
	"net/http"
	"sync"
)

// Defaults of Options.MaxStreams and MaxStreamsPerKey.
const (
	MaxStreamsDefault       = 1000
	MaxStreamsPerKeyDefault = 100
)

// Codes of the limits' errors.
const (
	typeRateLimit      = "rate_limit_error"
	codeTooManyStreams = "too_many_streams"
)

// streamLimiter caps the SSE streams open at once, in total and per owner
// (an API key's identity). A stream pins a page of events and its write
// buffers while its reader is slow or stalled, for up to WriteTimeout per
// write; the caps bound what readers can pin together.
type streamLimiter struct {
	maxTotal, maxPerOwner int // 0: no cap

	mu      sync.Mutex
	total   int
	byOwner map[string]int
}

func newStreamLimiter(maxTotal, maxPerOwner int) *streamLimiter {
	return &streamLimiter{maxTotal: maxTotal, maxPerOwner: maxPerOwner, byOwner: map[string]int{}}
}

// acquire takes a stream slot for owner (perOwner: count it against the
// owner's cap too) and returns the func that gives it back, or the 429 to
// reply when a cap is reached.
func (l *streamLimiter) acquire(owner string, perOwner bool) (func(), *apiError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return nil, tooManyStreams(fmt.Sprintf(
			"Too many concurrent streams on this server (limit %d). Retry shortly, or create the response with background=true and poll it.", l.maxTotal))
	}
	if perOwner && l.maxPerOwner > 0 && l.byOwner[owner] >= l.maxPerOwner {
		return nil, tooManyStreams(fmt.Sprintf(
			"Too many concurrent streams for this API key (limit %d). Wait for one of them to end, or create the response with background=true and poll it.", l.maxPerOwner))
	}
	l.total++
	if perOwner {
		l.byOwner[owner]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if perOwner {
				if l.byOwner[owner]--; l.byOwner[owner] == 0 {
					delete(l.byOwner, owner)
				}
			}
		})
	}, nil
}

func tooManyStreams(msg string) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: codeTooManyStreams, Message: msg, RetryAfter: 1}
}

// acquireStream takes a stream slot for the request's owner, counted
// against the per-key cap when authentication is on (with it off every
// client is the one owner "", and only the total cap applies). On a cap
// it replies 429 and returns false; otherwise the caller must call the
// returned release when its stream ends.
func (s *server) acquireStream(w http.ResponseWriter, r *http.Request) (func(), bool) {
	release, ae := s.streams.acquire(ownerFrom(r.Context()), s.authOn())
	if ae != nil {
		s.metrics.streamsRefused.Inc()
		s.writeError(w, r, ae)
		return nil, false
	}
	return release, true
}
