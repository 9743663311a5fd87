package postgres

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// undoStepRows undoes migration 016 (step rows) and with it the functions
// 018 rewrote, in s's
// schema, leaving what a version-15 build reads: checkpoints written with
// a manifest get their parts back as blobs listed in part_names and
// part_hashes, the rows of unfinished responses that commits left alone
// are brought up to date, and the functions are version 15's. Tests that
// undo older migrations run it first (the undo* constants assume a
// version-15 schema).
func undoStepRows(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	rows, err := s.pool.Query(ctx, "SELECT run_id, step, manifest, coalesce(part_hashes, '{}') FROM checkpoints WHERE manifest IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		run      string
		step     int64
		manifest []byte
		hashes   [][]byte
	}
	var rs []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.run, &r.step, &r.manifest, &r.hashes); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		es, err := decodeManifest(r.manifest)
		if err != nil {
			t.Fatal(err)
		}
		names, hashes := []string{}, [][]byte{}
		for _, e := range es {
			names = append(names, e.name)
			if e.inline == nil {
				hashes, r.hashes = append(hashes, r.hashes[0]), r.hashes[1:]
				continue
			}
			h := sha256.Sum256(e.inline)
			hashes = append(hashes, h[:])
			if _, err := s.pool.Exec(ctx, `INSERT INTO blobs (run_id, hash, size, data) VALUES ($1, $2, $3, $4)
				ON CONFLICT DO NOTHING`, r.run, h[:], len(e.inline), e.inline); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.pool.Exec(ctx, `UPDATE checkpoints SET part_names = $3, part_hashes = $4, manifest = NULL
			WHERE run_id = $1 AND step = $2`, r.run, r.step, names, hashes); err != nil {
			t.Fatal(err)
		}
	}
	undo := "UPDATE responses SET commit_step = " + respCommitStep + ", updated_at = " + respUpdatedAt +
		" WHERE completed_at IS NULL; " +
		"DROP FUNCTION superstep_commit_batch; DROP FUNCTION superstep_commit; DROP FUNCTION superstep_write_step; " +
		"DROP FUNCTION superstep_prune_checkpoints; " +
		strings.Replace(migrationFunction(t, 1, "superstep_fence"), "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1) +
		"DROP FUNCTION superstep_fence_code; " +
		strings.Replace(migrationFunction(t, 5, "superstep_append_batch"), "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1) +
		"ALTER TABLE checkpoints DROP COLUMN manifest, ALTER COLUMN part_names SET NOT NULL, ALTER COLUMN part_hashes SET NOT NULL; " +
		migrationSQL(t, 14) + "; DELETE FROM superstep_schema_version WHERE version >= 16"
	if _, err := s.pool.Exec(ctx, undo); err != nil {
		t.Fatalf("undo migration 16: %v", err)
	}
	s.parts = newPartCache(s.parts.max)
}

// migrationSQL is the text of the embedded migration of version v.
func migrationSQL(t *testing.T, v int) string {
	t.Helper()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version == v {
			return m.SQL
		}
	}
	t.Fatalf("no migration %d", v)
	return ""
}

// migrationFunction is the CREATE FUNCTION statement of the function name
// in the migration of version v.
func migrationFunction(t *testing.T, v int, name string) string {
	t.Helper()
	sql := migrationSQL(t, v)
	i := strings.Index(sql, "CREATE FUNCTION "+name+"(")
	if i < 0 {
		t.Fatalf("migration %d creates no function %s", v, name)
	}
	n := strings.Index(sql[i:], "END $$;")
	if n < 0 {
		t.Fatalf("migration %d: function %s has no end", v, name)
	}
	return sql[i:i+n+len("END $$;")] + "\n"
}
