package workflow

// Annotation is a fact an executor recorded about its superstep with
// Context.Annotate (for example the tokens an agent used), handed to the
// commit hook in Step.Annotations.
type Annotation struct {
	// ExecutorID is the executor of the step's workflow the annotation
	// comes from: the one that called Annotate, or the sub-workflow
	// executor (Workflow.AsExecutor) inside which it was called.
	ExecutorID string
	// Path lists the executor ids from ExecutorID down to the executor
	// that called Annotate: just ExecutorID, or more for an annotation
	// made inside a sub-workflow (["sub", "agent"]). Do not modify it.
	Path []string
	// Value is what the executor annotated.
	Value any
}

// Annotate records v about the current superstep for the run's driver: the
// runner hands it to the commit hook in Step.Annotations. It is for facts
// the driver needs that are not state the run continues from (the tokens
// an agent used, why its reply was cut short), so that they need not
// travel through shared state: annotations are not in the checkpoint, no
// executor can read them, and v's type need not be registered. v must not
// be modified afterwards.
//
// Only a successful attempt's annotations reach the Step: those of a failed
// attempt are dropped with it, and a retry annotates afresh. Annotations
// made inside a sub-workflow reach the parent's Step as annotations of the
// sub-workflow executor (see Annotation.Path). An uncommitted superstep
// re-runs and annotates again, so a driver counts only committed steps'.
func (c *Context) Annotate(v any) {
	c.buf.annotations = append(c.buf.annotations, Annotation{ExecutorID: c.exec, Path: []string{c.exec}, Value: v})
}

// annotateNested records the annotations of a sub-workflow's step as the
// running executor's, keeping the path to where they were made.
func (c *Context) annotateNested(as []Annotation) {
	for _, a := range as {
		path := make([]string, 0, len(a.Path)+1)
		path = append(append(path, c.exec), a.Path...)
		c.buf.annotations = append(c.buf.annotations, Annotation{ExecutorID: c.exec, Path: path, Value: a.Value})
	}
}
