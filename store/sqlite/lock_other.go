//go:build !unix

package sqlite

import (
	"fmt"
	"os"
)

// LockPath returns the lock file of the database at path: path + "-lock",
// next to it.
func LockPath(path string) string { return path + "-lock" }

// lockFile creates the lock file (LockPath) without locking it: without
// flock, a second process is detected by SQLite's own locking (ErrLocked
// after the busy timeout). Like the unix version it never opens the
// database file itself.
func lockFile(path string) (*os.File, error) {
	lp := LockPath(path)
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open lock file %s: %w", lp, err)
	}
	return f, nil
}

// unlockFile closes the lock file f.
func unlockFile(f *os.File) error { return f.Close() }
