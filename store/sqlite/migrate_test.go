package sqlite_test

// undoVersion4 undoes migration 4 (durable facts), for tests that build a
// database of an older schema version from a new one.
const undoVersion4 = "ALTER TABLE responses DROP COLUMN start_step; ALTER TABLE runs DROP COLUMN resume_failures; " +
	"ALTER TABLE runs DROP COLUMN resume_error; ALTER TABLE runs DROP COLUMN resume_not_before; "
