package responses

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics are the collectors of the HTTP layer.
type httpMetrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  prometheus.Gauge
	events   prometheus.Counter
	// streamsRefused counts streams refused by MaxStreams or
	// MaxStreamsPerKey (429 too_many_streams).
	streamsRefused prometheus.Counter
}

func newHTTPMetrics(reg *prometheus.Registry) (*httpMetrics, error) {
	m := &httpMetrics{
		registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "superstep_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "superstep_http_request_duration_seconds", Help: "HTTP request durations by route (streams included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"route"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "superstep_http_active_streams", Help: "SSE streams being written now.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_http_stream_events_total", Help: "SSE event frames written to clients.",
		}),
		streamsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_http_streams_refused_total", Help: "Streams refused with 429 because a stream cap (total or per key) was reached.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.streams, m.events, m.streamsRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("responses: register metrics: %w", err)
		}
	}
	return m, nil
}

// statusRecorder remembers the status a handler wrote. It forwards Flush
// and deadlines through Unwrap, so http.ResponseController still reaches
// the connection.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument counts requests by route pattern and status and times them.
func (s *server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := rec.status
			if code == 0 {
				code = http.StatusOK
			}
			s.metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
			s.metrics.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
	})
}

func (s *server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})
}
