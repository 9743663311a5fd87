//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// LockPath returns the lock file of the database at path: path + "-lock",
// next to it (as SQLite's own -wal and -shm files are). Open creates it
// and leaves it in place at Close (removing it would let two processes
// lock different files of one name).
func LockPath(path string) string { return path + "-lock" }

// lockFile takes an exclusive, non-blocking flock on the database's lock
// file (LockPath) so a second superstep process (or a second Open in this
// one) fails at once (after lockPatience) with ErrLocked instead of
// contending for SQLite's write lock. It never opens the database file
// itself: closing any descriptor of a file releases every POSIX lock the
// process holds on it, SQLite's included, so a failed second Open would
// make another connection (an operator's sqlite3 shell) believe it is the
// last one, checkpoint and delete the WAL the server still writes to.
func lockFile(path string) (*os.File, error) {
	lp := LockPath(path)
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open lock file %s: %w", lp, err)
	}
	// A lock held only by a child process between its fork and its exec
	// (see unlockFile) goes within a moment: a held lock is retried for
	// lockPatience before it is reported.
	deadline := time.Now().Add(lockPatience)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("sqlite: lock %s: %w", lp, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: %s (lock file %s)", ErrLocked, path, lp)
		}
		time.Sleep(wait)
	}
}

// lockPatience is how long Open retries a lock file that is locked: long
// enough for a child process forked while the lock was being released to
// exec, short enough that a second server fails at once to a person.
const lockPatience = 250 * time.Millisecond

// unlockFile closes the lock file f, releasing its flock. A child process
// started meanwhile holds a copy of every descriptor of this process
// between its fork and its exec, the lock file's included, and with it the
// flock, so a close in that window left the database locked for a moment
// (a reopen right after Close failed with ErrLocked). The close waits for
// no fork to be in flight (a fork holds syscall.ForkLock until its child
// execs), which narrows the window without closing it: the kernel resumes
// a vfork's parent just before the child's close-on-exec descriptors are
// closed. lockFile's retry covers the rest.
func unlockFile(f *os.File) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return f.Close()
}
