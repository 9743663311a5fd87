package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// MigrateTo creates or migrates the database at path to schema version
// version with the embedded migrations, as a build of that version would
// have: tests fill it with data in that version's layout and then Open it.
func MigrateTo(ctx context.Context, path string, version int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if version < 1 || version > len(ms) {
		return fmt.Errorf("sqlite: MigrateTo: no version %d", version)
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateTo(ctx, db, path, PageSizeDefault, ms[:version])
}
