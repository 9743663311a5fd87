package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
)

// Defaults of Options.
const (
	// RetryForDefault: a delivery not accepted within 72 hours of its
	// event is marked failed (OpenAI retries for as long).
	RetryForDefault    = 72 * time.Hour
	BackoffDefault     = time.Second
	BackoffMaxDefault  = time.Hour
	TimeoutDefault     = 10 * time.Second
	PollDefault        = time.Second
	ConcurrencyDefault = 8
	// KeepDoneDefault: delivered and failed deliveries are kept a week.
	KeepDoneDefault = 7 * 24 * time.Hour
)

// Options configure a Sender. Zero fields take their defaults.
type Options struct {
	// Secret signs every request (required).
	Secret *Secret
	// Owner names this sender in its claims (the host id; required).
	Owner string
	// RetryFor is how long after its event a delivery is retried; the
	// first failed attempt after it marks the delivery failed. Default
	// RetryForDefault.
	RetryFor time.Duration
	// Backoff is the wait after the first failed attempt; it doubles with
	// each attempt up to BackoffMax, and each wait is drawn at random from
	// its upper half (jitter), so that receivers back from an outage are
	// not hit by every sender at once.
	Backoff, BackoffMax time.Duration
	// Timeout bounds one attempt (connect, request, answer headers).
	Timeout time.Duration
	// Lease is how long a claim holds: a delivery whose sender died is
	// sent again by another after it. Default twice Timeout, so that a
	// claim outlives its attempt and report; at least Timeout.
	Lease time.Duration
	// Poll is how often the outbox is read for due deliveries other hosts
	// wrote, retries and expired claims (Kick reads it at once).
	Poll time.Duration
	// Concurrency bounds the attempts in flight.
	Concurrency int
	// KeepDone is how long delivered and failed deliveries are kept
	// (WebhookPrune); negative keeps them.
	KeepDone time.Duration
	// Client sends the requests; default a client of its own.
	Client *http.Client
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Metrics, when not nil, gets the sender's collectors.
	Metrics prometheus.Registerer
}

func (o *Options) withDefaults() (Options, error) {
	c := *o
	if c.Secret == nil || c.Owner == "" {
		return c, errors.New("webhook: Options.Secret and Options.Owner are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RetryFor, RetryForDefault)
	def(&c.Backoff, BackoffDefault)
	def(&c.BackoffMax, BackoffMaxDefault)
	def(&c.Timeout, TimeoutDefault)
	def(&c.Lease, 2*c.Timeout)
	def(&c.Poll, PollDefault)
	def(&c.KeepDone, KeepDoneDefault)
	if c.Concurrency == 0 {
		c.Concurrency = ConcurrencyDefault
	}
	if c.RetryFor < 0 || c.Backoff < 0 || c.BackoffMax < c.Backoff || c.Timeout < 0 || c.Poll < 0 || c.Concurrency < 0 {
		return c, errors.New("webhook: Options: durations and Concurrency must be positive, BackoffMax at least Backoff")
	}
	if c.Lease < c.Timeout {
		return c, fmt.Errorf("webhook: Options.Lease (%v) must be at least Timeout (%v)", c.Lease, c.Timeout)
	}
	if c.Client == nil {
		// Redirects are not followed: an endpoint is the URL configured,
		// and a 3xx answer a failed attempt.
		c.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Sender delivers the outbox's webhook deliveries. Start it once; Close
// stops it.
type Sender struct {
	store   store.WebhookOutbox
	opts    Options
	log     *slog.Logger
	metrics *metrics
	kick    chan struct{}
	slots   chan struct{} // one per attempt in flight
	// ownClient: the client is the Sender's own (Options.Client nil),
	// its idle connections closed by Close.
	ownClient bool

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop and its attempts ended
}

// New returns a Sender for s's outbox.
func New(s store.WebhookOutbox, o *Options) (*Sender, error) {
	if s == nil || o == nil {
		return nil, errors.New("webhook: New needs a store and Options")
	}
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	return &Sender{store: s, opts: opts, log: opts.Logger, metrics: m, kick: make(chan struct{}, 1),
		slots: make(chan struct{}, opts.Concurrency), done: make(chan struct{}), ownClient: o.Client == nil}, nil
}

// Start starts the delivery loop on a goroutine the Sender owns, until
// Close (or ctx's end).
func (s *Sender) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("webhook: Sender started twice")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go s.loop(ctx)
	return nil
}

// Kick makes the loop read the outbox now (host.Config.WebhookEnqueued).
// It never blocks.
func (s *Sender) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Close stops the loop and waits for the attempts in flight, which are
// cancelled: their deliveries stay claimed until the claims expire, then
// any sender retries them. A Sender never started closes at once.
func (s *Sender) Close() error {
	s.mu.Lock()
	s.started = true           // no Start after Close
	running := s.cancel != nil // Start ran: its loop closes done
	if running {
		s.cancel()
	}
	s.mu.Unlock()
	if running {
		<-s.done
	}
	if s.ownClient {
		s.opts.Client.CloseIdleConnections()
	}
	return nil
}

// loop claims what is due whenever a slot is free, and waits for a kick,
// a finished attempt or the poll interval otherwise.
func (s *Sender) loop(ctx context.Context) {
	var wg sync.WaitGroup
	defer close(s.done)
	defer wg.Wait()
	finished := make(chan struct{}, cap(s.slots))
	poll := time.NewTicker(s.opts.Poll)
	defer poll.Stop()
	lastCount, lastPrune := time.Time{}, time.Time{}
	for {
		full := s.round(ctx, &wg, finished)
		if now := time.Now(); now.Sub(lastCount) >= 10*s.opts.Poll {
			lastCount = now
			s.count(ctx)
		}
		if now := time.Now(); s.opts.KeepDone > 0 && now.Sub(lastPrune) >= time.Hour {
			lastPrune = now
			s.prune(ctx)
		}
		if full {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-finished:
		case <-poll.C:
		}
	}
}

// round claims as many due deliveries as there are free slots and starts
// their attempts. It reports whether it claimed as many as it asked for.
func (s *Sender) round(ctx context.Context, wg *sync.WaitGroup, finished chan<- struct{}) bool {
	free := cap(s.slots) - len(s.slots)
	if free == 0 || ctx.Err() != nil {
		return false
	}
	ds, err := s.store.WebhookClaim(ctx, &store.WebhookClaimParams{Owner: s.opts.Owner, Lease: s.opts.Lease, Limit: free})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("webhook: claiming due deliveries failed", "err", err)
		}
		return false
	}
	for _, d := range ds {
		s.slots <- struct{}{}
		wg.Go(func() {
			defer func() {
				<-s.slots
				select {
				case finished <- struct{}{}:
				default:
				}
			}()
			s.deliver(ctx, d)
		})
	}
	return len(ds) == free
}

// deliver makes one attempt of d and reports its outcome.
func (s *Sender) deliver(ctx context.Context, d *store.WebhookDelivery) {
	start := time.Now()
	err := s.post(ctx, d)
	s.metrics.attemptSeconds.Observe(time.Since(start).Seconds())
	if ctx.Err() != nil {
		return // shutting down: the claim expires and the delivery is retried
	}
	p := &store.WebhookReportParams{ID: d.ID, Owner: s.opts.Owner, Attempt: d.Attempts, Status: store.WebhookDelivered}
	log := s.log.With("delivery_id", d.ID, "event_id", d.EventID, "type", d.Type, "response_id", d.ResponseID,
		"endpoint", d.Endpoint, "attempt", d.Attempts)
	if err == nil {
		s.metrics.delivered.Inc()
		s.metrics.lag.Observe(time.Since(d.CreatedAt).Seconds())
		log.Debug("webhook: delivered")
	} else {
		s.metrics.attemptFailures.Inc()
		p.Error = err.Error()
		wait := s.backoff(d.Attempts)
		if time.Since(d.CreatedAt)+wait > s.opts.RetryFor {
			p.Status = store.WebhookFailed
			s.metrics.failed.Inc()
			log.Error("webhook: delivery failed; no more retries", "retried_for", time.Since(d.CreatedAt).Round(time.Second).String(), "err", err)
		} else {
			p.Status, p.RetryAfter = store.WebhookPending, wait
			log.Warn("webhook: attempt failed; retrying", "retry_after", wait.String(), "err", err)
		}
	}
	if rerr := s.store.WebhookReport(ctx, p); rerr != nil {
		// ErrFenced: the claim expired and another sender took it. Any
		// other failure: the claim expires and the delivery is retried.
		log.Warn("webhook: reporting the attempt failed; the delivery will be attempted again", "status", p.Status, "err", rerr)
		return
	}
	if p.Status == store.WebhookPending && p.RetryAfter < s.opts.Poll {
		// A retry due before the next poll: look for it when it is due.
		time.AfterFunc(p.RetryAfter, s.Kick)
	}
}

// backoff is the wait after the attempt-th failed attempt: Backoff
// doubled per attempt, capped, drawn from its upper half.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.opts.Backoff
	for i := 1; i < attempt && d < s.opts.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.opts.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// post sends d once; nil means a 2xx answer.
func (s *Sender) post(ctx context.Context, d *store.WebhookDelivery) error {
	body, err := protocol.NewWebhookEvent(d.EventID, d.Type, d.CreatedAt.Unix(), d.ResponseID).Marshal()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "superstep-webhook")
	s.opts.Secret.SetHeaders(req.Header, d.EventID, time.Now(), body)
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook: %s answered %s", d.Endpoint, resp.Status)
	}
	return nil
}

// count refreshes the queue gauges.
func (s *Sender) count(ctx context.Context) {
	c, err := s.store.WebhookCount(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("webhook: counting deliveries failed", "err", err)
		}
		return
	}
	s.metrics.queue.WithLabelValues(string(store.WebhookPending)).Set(float64(c.Pending))
	s.metrics.queue.WithLabelValues(string(store.WebhookFailed)).Set(float64(c.Failed))
	s.metrics.queue.WithLabelValues(string(store.WebhookDelivered)).Set(float64(c.Delivered))
}

// prune deletes deliveries done longer than KeepDone ago.
func (s *Sender) prune(ctx context.Context) {
	n, err := s.store.WebhookPrune(ctx, &store.WebhookPruneParams{Before: time.Now().Add(-s.opts.KeepDone)})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("webhook: pruning done deliveries failed", "err", err)
		}
		return
	}
	if n > 0 {
		s.log.Info("webhook: pruned done deliveries", "deleted", n)
	}
}
