package responses

import (
	"strings"
	"testing"
)

// TestHosts_NeedsAdminKey: GET /v1/hosts shows every owner's running
// responses, so with keys configured only an admin key reads it; another
// key gets 403 permission_denied and sees no response id (before, any key
// saw every owner's running responses). Admin keys are API keys too.
// Without keys the listing is open, as before.
func TestHosts_NeedsAdminKey(t *testing.T) {
	t.Parallel()
	st, _ := openSQLite(t, nil)
	ts := newTestServer(t, st, &Options{APIKeys: map[string]string{"ka": "alice", "kb": "bob"},
		AdminKeys: map[string]string{"kadm": "ops"}})
	ts.key = "ka"
	id := ts.createBackground(`{"model":"demo.silent","input":"x","background":true,"metadata":{"steps":"900","step_delay_ms":"50"}}`)
	ts.key = "kb"
	rp := ts.do("GET", "/v1/hosts", "")
	if rp.status != 403 || strings.Contains(rp.body, id) {
		t.Fatalf("bob's GET /v1/hosts: %d %s; want 403 without alice's response", rp.status, rp.body)
	}
	if e := errorOf(t, rp); e.Code == nil || *e.Code != "permission_denied" {
		t.Fatalf("error %+v", e)
	}
	ts.key = "kadm"
	if rp := ts.do("GET", "/v1/hosts", ""); rp.status != 200 || !strings.Contains(rp.body, id) {
		t.Fatalf("admin GET /v1/hosts: %d %s; want alice's running response", rp.status, rp.body)
	}
	own := ts.createBackground(`{"model":"demo.echo","input":"x","background":true}`)
	if rp := ts.do("GET", "/v1/responses/"+own, ""); rp.status != 200 {
		t.Fatalf("an admin key's own response: %d %s", rp.status, rp.body)
	}
	ts.key = "wrong"
	if rp := ts.do("GET", "/v1/hosts", ""); rp.status != 401 {
		t.Fatalf("an unknown key: %d %s", rp.status, rp.body)
	}
	ts.key = "ka"
	if rp := ts.do("POST", "/v1/responses/"+id+"/cancel", ""); rp.status != 200 {
		t.Fatalf("cancel: %d %s", rp.status, rp.body)
	}

	open := newTestServer(t, openSQLiteFile(t), nil)
	if rp := open.do("GET", "/v1/hosts", ""); rp.status != 200 {
		t.Fatalf("GET /v1/hosts without keys: %d %s", rp.status, rp.body)
	}
}
