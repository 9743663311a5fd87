package crash

import (
	"context"
	"testing"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

func TestCrash_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_crash")
	runCrash(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	})
}
