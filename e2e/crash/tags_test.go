package crash

import (
	"regexp"

	"github.com/superstep/superstep/verify"
)

// refTagPattern finds a reference run's tag in its outcome.
var refTagPattern = regexp.MustCompile(`\[r[0-9]{4}\]`)

// retagReferences gives each tagged response a reference outcome with its
// own tag in place of the reference run's: a demo that echoes its input
// (demo.writer-reviewer) carries the tag into its output.
func retagReferences(in *verify.Input) {
	for i := range in.Responses {
		r := &in.Responses[i]
		if r.Reference == nil || r.Record == nil {
			continue
		}
		tag := tagPattern.Find(r.Record.Request)
		if tag == nil {
			continue
		}
		ref := verify.Outcome{Status: r.Reference.Status, Output: make([]string, len(r.Reference.Output))}
		for j, s := range r.Reference.Output {
			ref.Output[j] = refTagPattern.ReplaceAllLiteralString(s, string(tag))
		}
		r.Reference = &ref
	}
}
