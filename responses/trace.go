package responses

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the HTTP spans.
const tracerName = "github.com/superstep/superstep/responses"

// traceContext reads the W3C traceparent and tracestate headers.
var traceContext = propagation.TraceContext{}

// trace wraps an API route in a server span named after its pattern, a
// child of the request's traceparent when it has one, with the HTTP
// semantic-convention attributes. Without Options.TracerProvider it is
// next itself.
func (s *server) trace(pattern string, next http.Handler) http.Handler {
	if s.opts.TracerProvider == nil {
		return next
	}
	tracer := s.opts.TracerProvider.Tracer(tracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, pattern, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("http.route", r.Pattern),
			attribute.String("url.path", r.URL.Path), attribute.String("user_agent.original", r.UserAgent())))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		code := rec.status
		if code == 0 {
			code = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}
