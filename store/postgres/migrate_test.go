package postgres

import "testing"

// undoVersion4 undoes migration 4 (durable facts), for tests that build a
// database of an older schema version from a new one.
const undoVersion4 = "ALTER TABLE responses DROP COLUMN start_step; ALTER TABLE runs DROP COLUMN resume_failures, " +
	"DROP COLUMN resume_error, DROP COLUMN resume_not_before; "

// latestVersion is the version of the newest embedded migration.
func latestVersion(t testing.TB) int {
	t.Helper()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}
