//go:build !unix

package sqlite

import (
	"fmt"
	"os"
)

// lockFile opens the database file; without flock, a second process is
// detected by SQLite's own locking (ErrLocked after the busy timeout).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return f, nil
}
