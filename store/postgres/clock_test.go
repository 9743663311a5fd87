package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// dbNow reads the database's clock.
func dbNow(t *testing.T, s *Store) time.Time {
	t.Helper()
	var now time.Time
	if err := s.pool.QueryRow(t.Context(), "SELECT now()").Scan(&now); err != nil {
		t.Fatalf("read the database clock: %v", err)
	}
	return now
}

// requireAfterDB fails unless got is d after a time of the database's
// clock between before and after.
func requireAfterDB(t *testing.T, what string, got, before, after time.Time, d time.Duration) {
	t.Helper()
	if got.Before(before.Add(d)) || got.After(after.Add(d)) {
		t.Fatalf("%s: %v, want %v after the database's clock, between %v and %v", what, got, d, before.Add(d), after.Add(d))
	}
}

// claimedIDs returns the IDs of claimed runs.
func claimedIDs(runs []*store.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

// Hosts whose clocks are an hour off, ahead and behind, decide no lease by
// them: every lease is judged by the database's clock (issue 12). A host
// ahead cannot claim a healthy host's live run; a healthy host can neither
// take a live run of a host behind nor be kept off the run of a host ahead
// once its lease expired by the database's clock; the expiries and
// back-offs the skewed hosts write (create, renew, release after a failed
// resume) are the database's clock plus the duration.
func TestLease_SkewedHostClocks(t *testing.T) {
	t.Parallel()
	schema := newSchemaName(t)
	ctx := t.Context()
	healthy := openStore(t, schema, nil)
	type skewedHost struct {
		name string
		s    *Store
	}
	skewed := []skewedHost{
		{"ahead", openStore(t, schema, &Options{HostClock: func() time.Time { return time.Now().Add(time.Hour) }})},
		{"behind", openStore(t, schema, &Options{HostClock: func() time.Time { return time.Now().Add(-time.Hour) }})},
	}
	const lease = time.Minute

	live := storetest.CreateResponse(ctx, t, healthy, &storetest.ResponseOpts{LeaseOwner: "healthy", LeaseDuration: time.Hour})
	for _, h := range skewed {
		claimed, err := h.s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: h.name, Duration: lease})
		if err != nil || len(claimed) != 0 {
			t.Fatalf("host %s claimed %v (err %v) while the healthy host's lease is live", h.name, claimedIDs(claimed), err)
		}
	}

	for _, h := range skewed {
		before := dbNow(t, healthy)
		c := storetest.CreateResponse(ctx, t, h.s, &storetest.ResponseOpts{LeaseOwner: h.name, LeaseDuration: lease})
		requireAfterDB(t, h.name+": lease expiry at create", c.Run.Lease.ExpiresAt, before, dbNow(t, healthy), lease)
		before = dbNow(t, healthy)
		expires, err := h.s.LeaseRenew(ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: h.name, Epoch: c.Run.Lease.Epoch, Duration: lease})
		if err != nil {
			t.Fatalf("%s: LeaseRenew: %v", h.name, err)
		}
		renewed := dbNow(t, healthy)
		requireAfterDB(t, h.name+": lease expiry at renewal", expires, before, renewed, lease)
		storetest.Commit(ctx, t, h.s, c.Run.ID, nil)

		claimed, err := healthy.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "healthy", Duration: lease})
		if err != nil || len(claimed) != 0 {
			t.Fatalf("the healthy host claimed %v (err %v) while host %s's lease is live", claimedIDs(claimed), err, h.name)
		}
		// Once the lease expired by the database's clock (the claim is
		// moved there with Now), the healthy host takes the run over.
		claimed, err = healthy.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "healthy", Duration: lease, Now: renewed.Add(lease)})
		if err != nil || !slices.Contains(claimedIDs(claimed), c.Run.ID) {
			t.Fatalf("the healthy host claimed %v (err %v) after host %s's lease expired, want %s", claimedIDs(claimed), err, h.name, c.Run.ID)
		}

		// A release after a failed resume backs the run off by the
		// database's clock too.
		c2 := storetest.CreateResponse(ctx, t, h.s, &storetest.ResponseOpts{LeaseOwner: h.name, LeaseDuration: lease})
		before = dbNow(t, healthy)
		if err := h.s.LeaseRelease(ctx, &store.LeaseParams{RunID: c2.Run.ID, Owner: h.name, Epoch: c2.Run.Lease.Epoch,
			Failure: &store.ResumeFailure{Reason: "model not registered", RetryAfter: lease}}); err != nil {
			t.Fatalf("%s: LeaseRelease: %v", h.name, err)
		}
		released := dbNow(t, healthy)
		run, err := healthy.RunGet(ctx, c2.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		requireAfterDB(t, h.name+": resume back-off", run.Resume.NotBefore, before, released, lease)
		claimed, err = healthy.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "healthy", Duration: lease})
		if err != nil || len(claimed) != 0 {
			t.Fatalf("the healthy host claimed %v (err %v) during host %s's back-off", claimedIDs(claimed), err, h.name)
		}
		claimed, err = healthy.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "healthy", Duration: lease, Now: released.Add(lease)})
		if err != nil || !slices.Contains(claimedIDs(claimed), c2.Run.ID) {
			t.Fatalf("the healthy host claimed %v (err %v) after host %s's back-off, want %s", claimedIDs(claimed), err, h.name, c2.Run.ID)
		}
	}

	run, err := healthy.RunGet(ctx, live.Run.ID)
	if err != nil || run.Lease.Owner != "healthy" || run.Lease.Epoch != 1 {
		t.Fatalf("the healthy host's run: %+v, %v; want its lease kept at epoch 1", run, err)
	}
	storetest.Commit(ctx, t, healthy, live.Run.ID, nil)
	checkStore(t, healthy)
}
