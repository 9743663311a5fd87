package main

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// TestCountingKeepsCapabilities: the store the benched host gets has the
// same exported methods as the store it wraps, no fewer (a hidden
// Notifier, LeaseBatchRenewer or Clock makes the host poll, renew one run
// at a time or keep its own clock) and no more (a capability the store
// lacks would be found by the host and fail).
func TestCountingKeepsCapabilities(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	pg, err := postgres.Open(ctx, pgtest.URL(), &postgres.Options{Schema: pgtest.Schema(t, "benchcount")})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for _, st := range []store.Store{sq, pg} {
		wrapped, _, err := counting(st)
		if err != nil {
			t.Fatal(err)
		}
		want, got := methods(reflect.TypeOf(st)), methods(reflect.TypeOf(wrapped))
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%T wrapped: methods\n%v\nwant\n%v", st, got, want)
		}
		if _, ok := wrapped.(store.CreateCommitter); !ok {
			t.Errorf("%T wrapped is not a store.CreateCommitter", st)
		}
	}
	if _, ok := any(&countedPostgres{}).(store.LeaseBatchRenewer); !ok {
		t.Error("countedPostgres is not a store.LeaseBatchRenewer")
	}
}

func methods(t reflect.Type) []string {
	var names []string
	for m := range t.Methods() {
		names = append(names, m.Name)
	}
	return names
}
