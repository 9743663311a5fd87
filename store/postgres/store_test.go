package postgres

import (
	"context"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

func TestStore(t *testing.T) {
	requireDB(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store { return newStore(t) },
		DSN: func(t *testing.T, s store.Store) string { return testDSN(s.(*Store)) },
		Open: func(t *testing.T, dsn string) store.Store {
			schema, url := parseTestDSN(dsn)
			s, err := Open(context.Background(), url, &Options{Schema: schema})
			if err != nil {
				t.Fatalf("Open(%s): %v", dsn, err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		FaultPoints: commitPoints,
	})
}
