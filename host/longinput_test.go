package host_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// A request of host.InputInRequestMin bytes or more whose input is the
// request's records no input of its own (its text is stored once, in the
// request), and recovery reads the input from the request: a crash before
// the first commit re-runs the echo with the whole text.
func TestHost_Recover_LongInputFromRequest(t *testing.T) {
	t.Parallel()
	sc := newScenario(t, host.Config{})
	text := strings.Repeat("a long <input> & \"text\"\n", host.InputInRequestMin/20)
	sc.arm(&faultRule{point: host.FaultCommitBefore, mode: modeCrash})
	r := sc.create(examples.Echo, text, nil)
	sc.waitCrash()
	sc.stop(true)
	sc.mark()
	db, err := sql.Open("sqlite3", sc.path)
	if err != nil {
		t.Fatal(err)
	}
	var input []byte
	var request int
	// A long request is stored apart from its row (SQLite's
	// response_bodies, schema version 19), with the input when there is one.
	if err := db.QueryRow(`SELECT coalesce(r.input, b.input), length(coalesce(r.request, b.request))
		FROM responses r LEFT JOIN response_bodies b ON b.num = r.num WHERE r.id = ?`, r.ID).Scan(&input, &request); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if input != nil || request < host.InputInRequestMin {
		t.Fatalf("a request of %d bytes recorded %d bytes of input, want none", request, len(input))
	}
	sc.start()
	sc.waitDone(r.ID)
	sc.check(map[string]verify.Outcome{r.ID: {Status: "completed", Output: []string{text}}})
}

// A conversation turn whose long input is not recorded apart (it is the
// request's) still adds that input to its conversation.
func TestHost_ConversationLongTurnInput(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	if err := b.host.RegisterAgent("chat", historyAgent); err != nil {
		t.Fatal(err)
	}
	c, _, err := b.host.ConversationCreate(testCtx(t), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("a long turn\n", host.InputInRequestMin/10)
	r := turn(t, b.host, c.ID, "", text)
	if got := wait(t, b.host, r.ID); got.Status != store.StatusCompleted || got.Input != nil {
		t.Fatalf("the turn: %s, %d bytes of input recorded (want none)", got.Status, len(got.Input))
	}
	got := convTexts(t, b.host, c.ID, "")
	if len(got) != 3 || got[0] != "user:"+text {
		t.Fatalf("the conversation holds %d items, the first %.40q; want the turn's input first", len(got), got)
	}
}
