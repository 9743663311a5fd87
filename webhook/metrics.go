package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sender's Prometheus collectors.
type metrics struct {
	delivered       prometheus.Counter
	attemptFailures prometheus.Counter
	failed          prometheus.Counter
	attemptSeconds  prometheus.Histogram
	lag             prometheus.Histogram
	queue           *prometheus.GaugeVec
}

// newMetrics creates the collectors and registers them on reg (if not nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_webhook_deliveries_total", Help: "Webhook deliveries accepted by their endpoint (a 2xx answer)."}),
		attemptFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_webhook_attempt_failures_total", Help: "Webhook attempts that failed (an error or a non-2xx answer; each retry counts)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_webhook_failed_total", Help: "Webhook deliveries given up after their retry period (marked failed)."}),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "superstep_webhook_attempt_seconds", Help: "Latency of webhook attempts.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 13)}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "superstep_webhook_delivery_lag_seconds", Help: "Time from a response's terminal commit to its webhook's acceptance.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "superstep_webhook_deliveries",
			Help: "Webhook deliveries in the outbox per status (pending: the queue depth; failed: given up), as last counted."},
			[]string{"status"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.delivered, m.attemptFailures, m.failed, m.attemptSeconds, m.lag, m.queue} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
