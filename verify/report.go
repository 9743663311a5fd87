package verify

import (
	"errors"
	"fmt"
	"strings"
)

// Invariant names one property Check asserts; every Violation carries one.
type Invariant string

// The invariants Check asserts.
const (
	// InvLogSeq: the log's sequence numbers are 0, 1, 2, … without gap, and
	// every entry belongs to the response.
	InvLogSeq Invariant = "log-seq"
	// InvCreated: exactly one response.created, at sequence 0.
	InvCreated Invariant = "created"
	// InvTerminal: exactly one terminal event, and it is the last.
	InvTerminal Invariant = "terminal"
	// InvPayload: each payload is JSON whose type and sequence_number equal
	// the log entry's, and whose response (if any) is this response.
	InvPayload Invariant = "payload"
	// InvLogSteps: the commit steps recorded with the events never go back.
	InvLogSteps Invariant = "log-steps"
	// InvClientView: a client received the log from where it started, with
	// no gap, duplicate or reordering, up to the terminal event.
	InvClientView Invariant = "client-view"
	// InvOutputKept: every output item shown to clients is in the final
	// response at the same index with the same content.
	InvOutputKept Invariant = "output-kept"
	// InvRecord: the stored response record agrees with its log.
	InvRecord Invariant = "record"
	// InvReference: the final outcome equals the crash-free reference run's.
	InvReference Invariant = "reference"
	// InvCommittedRerun: an executor of a committed superstep ran again.
	InvCommittedRerun Invariant = "committed-rerun"
	// InvRerunsPerCrash: a superstep re-ran more often than crashes allow.
	InvRerunsPerCrash Invariant = "reruns-per-crash"
	// InvJournal: the journal could not be read or does not fit the input.
	InvJournal Invariant = "journal"
)

// Violation is one broken invariant. It is an error.
type Violation struct {
	Invariant  Invariant
	ResponseID string // "" when the violation is not about one response
	Client     string // the client's name for client-view violations
	Msg        string
}

// Error formats the violation as "verify: response R: client C: inv: msg".
func (v Violation) Error() string {
	var b strings.Builder
	b.WriteString("verify: ")
	if v.ResponseID != "" {
		fmt.Fprintf(&b, "response %s: ", v.ResponseID)
	}
	if v.Client != "" {
		fmt.Fprintf(&b, "client %s: ", v.Client)
	}
	fmt.Fprintf(&b, "%s: %s", v.Invariant, v.Msg)
	return b.String()
}

// Report is the result of Check: what was checked and what was violated.
type Report struct {
	Responses      int // responses checked
	Events         int // log entries checked
	ClientEvents   int // client-received events checked
	JournalEntries int // journal entries checked
	Violations     []Violation
}

// Err returns every violation joined with errors.Join, or nil when there is
// none.
func (r *Report) Err() error {
	errs := make([]error, len(r.Violations))
	for i, v := range r.Violations {
		errs[i] = v
	}
	return errors.Join(errs...)
}

// Has reports whether some violation is of invariant inv.
func (r *Report) Has(inv Invariant) bool {
	for _, v := range r.Violations {
		if v.Invariant == inv {
			return true
		}
	}
	return false
}

// String summarises the report in one line.
func (r *Report) String() string {
	return fmt.Sprintf("verify: %d responses, %d log events, %d client events, %d journal entries: %d violations",
		r.Responses, r.Events, r.ClientEvents, r.JournalEntries, len(r.Violations))
}

// add appends a violation with a formatted message.
func (r *Report) add(inv Invariant, responseID, client, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{
		Invariant: inv, ResponseID: responseID, Client: client, Msg: fmt.Sprintf(format, args...),
	})
}
