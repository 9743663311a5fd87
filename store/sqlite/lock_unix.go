//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// LockPath returns the lock file of the database at path: path + "-lock",
// next to it (as SQLite's own -wal and -shm files are). Open creates it
// and leaves it in place at Close (removing it would let two processes
// lock different files of one name).
func LockPath(path string) string { return path + "-lock" }

// lockFile takes an exclusive, non-blocking flock on the database's lock
// file (LockPath) so a second superstep process (or a second Open in this
// one) fails at once with ErrLocked instead of contending for SQLite's
// write lock. It never opens the database file itself: closing any
// descriptor of a file releases every POSIX lock the process holds on
// it, SQLite's included, so a failed second Open would make another
// connection (an operator's sqlite3 shell) believe it is the last one,
// checkpoint and delete the WAL the server still writes to.
func lockFile(path string) (*os.File, error) {
	lp := LockPath(path)
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open lock file %s: %w", lp, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (lock file %s)", ErrLocked, path, lp)
		}
		return nil, fmt.Errorf("sqlite: lock %s: %w", lp, err)
	}
	return f, nil
}
