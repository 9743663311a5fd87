package agent

// Unexported helpers the external tests use.
var (
	WithIdempotencyKey = withIdempotencyKey
	WithMetadata       = withMetadata
	ValueText          = valueText
)
