package host

// runInfo is what a run's driver tells its executors about the response
// they work for (as a workflow.Invocation).
type runInfo struct {
	ResponseID string
	// Metadata is the request metadata of that response. Do not modify it.
	Metadata map[string]string
}
