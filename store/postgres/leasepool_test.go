package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// Lease renewals and host heartbeats do not queue behind other work for a
// connection: with every connection of the main pool taken (a busy host's
// commits and creates), they still go through. Before the lease pool, a
// renewal waited for a connection until the host's lease guard stopped a
// healthy run (seen in TestMultihost_Spread under load).
func TestLeasePool_RenewalsSkipBusyPool(t *testing.T) {
	t.Parallel()
	requireDB(t)
	schema := newSchemaName(t)
	c := storetest.CreateResponse(t.Context(), t, openStore(t, schema, nil), nil)
	s := openStore(t, schema, &Options{MaxConns: 1})
	held, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	// Blocked for good without the lease pool: the deadline only ends the test.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := renew(ctx, s, c); err != nil {
		t.Fatalf("renewal with the main pool taken: %v", err)
	}
	if _, err := s.HostHeartbeat(ctx, &store.HostHeartbeatParams{Host: store.HostInfo{ID: "h"}, TTL: time.Minute}); err != nil {
		t.Fatalf("heartbeat with the main pool taken: %v", err)
	}
}
