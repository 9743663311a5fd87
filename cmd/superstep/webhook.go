package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/webhook"
)

// webhookConfig is the webhook part of serve's command line.
type webhookConfig struct {
	urls       []string
	secretFile string
	retryFor   time.Duration
	timeout    time.Duration
	// secret is the parsed secret (after resolve): from --webhook-secret-file,
	// else SUPERSTEP_WEBHOOK_SECRET.
	secret *webhook.Secret
}

// register adds the webhook flags to fs.
func (c *webhookConfig) register(fs *flag.FlagSet) {
	fs.Func("webhook-url", "endpoint to post webhook events of finished responses to (repeatable; env SUPERSTEP_WEBHOOK_URL, comma-separated); needs a secret", func(s string) error {
		c.urls = append(c.urls, s)
		return nil
	})
	fs.StringVar(&c.secretFile, "webhook-secret-file", "", "file holding the webhook signing secret, whsec_<base64> (default: env SUPERSTEP_WEBHOOK_SECRET, the secret itself). With a secret, this host also sends deliveries other hosts enqueued")
	fs.DurationVar(&c.retryFor, "webhook-retry-for", webhook.RetryForDefault, "how long a webhook delivery is retried before it is marked failed")
	fs.DurationVar(&c.timeout, "webhook-timeout", webhook.TimeoutDefault, "how long one webhook attempt may take; a delivery claimed by a host that died is sent again by another after twice that")
}

// resolve reads the environment (for what the command line left unset)
// and the secret, and checks the whole.
func (c *webhookConfig) resolve(fs *flag.FlagSet) error {
	if !flagSet(fs, "webhook-url") {
		for _, u := range strings.Split(os.Getenv("SUPERSTEP_WEBHOOK_URL"), ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.urls = append(c.urls, u)
			}
		}
	}
	var errs []error
	for _, u := range c.urls {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("serve: --webhook-url must be an http(s) URL, got %q", redactModelURL(u)))
		}
	}
	raw, from := os.Getenv("SUPERSTEP_WEBHOOK_SECRET"), "SUPERSTEP_WEBHOOK_SECRET"
	if c.secretFile != "" {
		b, err := os.ReadFile(c.secretFile)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("serve: --webhook-secret-file: %w", err))...)
		}
		raw, from = string(b), c.secretFile
	}
	if raw != "" {
		s, err := webhook.ParseSecret(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("serve: webhook secret (%s): %w", from, err))
		}
		c.secret = s
	}
	if len(c.urls) > 0 && raw == "" {
		errs = append(errs, errors.New("serve: --webhook-url needs a signing secret: --webhook-secret-file or SUPERSTEP_WEBHOOK_SECRET"))
	}
	if c.retryFor <= 0 || c.timeout <= 0 {
		errs = append(errs, fmt.Errorf("serve: --webhook-retry-for and --webhook-timeout must be positive, got %v and %v", c.retryFor, c.timeout))
	}
	return errors.Join(errs...)
}

// reportWebhooks prints, for `superstep check`, the outbox's counts and
// its failed deliveries (when it holds any): failed deliveries are not an
// inconsistency, but nobody will send them.
func reportWebhooks(ctx context.Context, s store.Store, stdout io.Writer) error {
	o, ok := s.(store.WebhookOutbox)
	if !ok {
		return nil
	}
	c, err := o.WebhookCount(ctx)
	if err != nil {
		return fmt.Errorf("count webhook deliveries: %w", err)
	}
	if *c == (store.WebhookCounts{}) {
		return nil
	}
	fmt.Fprintf(stdout, "webhooks: %d pending, %d delivered, %d failed\n", c.Pending, c.Delivered, c.Failed)
	var after int64
	for {
		ds, err := o.WebhookList(ctx, &store.WebhookListParams{Status: store.WebhookFailed, After: after, Limit: 100})
		if err != nil {
			return fmt.Errorf("list failed webhook deliveries: %w", err)
		}
		for _, d := range ds {
			fmt.Fprintf(stdout, "webhook failed: delivery %d event %s (%s of %s) to %s after %d attempts: %s\n",
				d.ID, d.EventID, d.Type, d.ResponseID, redactModelURL(d.Endpoint), d.Attempts, d.LastError)
			after = d.ID
		}
		if len(ds) < 100 {
			return nil
		}
	}
}
