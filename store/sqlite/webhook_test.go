package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestWebhook_OpenReleasesClaims: the deliveries a previous process had
// claimed (it held the file lock, so it is gone) are due again as soon as
// the database is reopened, not when their claims would expire; a retry
// scheduled by a report stays scheduled.
func TestWebhook_OpenReleasesClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c := storetest.CreateResponse(ctx, t, s, nil)
		p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Status: store.StatusCompleted})
		p.Webhooks = []store.WebhookInput{{EventID: storetest.NewID("evt"), Type: "response.completed", Endpoint: "http://hooks.test/"}}
		if _, err := s.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := s.WebhookClaim(ctx, &store.WebhookClaimParams{Owner: "dead", Lease: time.Hour})
	if err != nil || len(ds) != 2 {
		t.Fatalf("claim: %v, %v", ds, err)
	}
	retry := ds[1]
	if err := s.WebhookReport(ctx, &store.WebhookReportParams{ID: retry.ID, Owner: "dead", Attempt: 1, Status: store.WebhookPending,
		RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds, err = s.WebhookClaim(ctx, &store.WebhookClaimParams{Owner: "next", Lease: time.Hour})
	if err != nil || len(ds) != 1 || ds[0].ID == retry.ID || ds[0].Attempts != 2 {
		t.Fatalf("claim after reopen = %+v, %v; want the claimed delivery, at attempt 2, and not the scheduled retry", ds, err)
	}
}
