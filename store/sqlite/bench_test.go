package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// BenchmarkStore runs the shared commit benchmarks on a FULL store.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, benchHarness(nil))
}

// BenchmarkStore4KPages is BenchmarkStore with 4 KB pages: more rows per
// page, fewer WAL frames per group commit, more bytes per frame.
func BenchmarkStore4KPages(b *testing.B) {
	storetest.Bench(b, benchHarness(&sqlite.Options{PageSize: 4096}))
}

// BenchmarkResponseRead: a response with a 1 MiB request, read whole and
// without the request (storetest.BenchResponseRead).
func BenchmarkResponseRead(b *testing.B) {
	storetest.BenchResponseRead(b, benchHarness(nil))
}

func benchHarness(opts *sqlite.Options) storetest.BenchHarness {
	return storetest.BenchHarness{
		New: func(b *testing.B) store.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		BareTx: bareTx,
		Transactions: func(s store.Store) int64 {
			return s.(*sqlite.Store).Stats().Transactions
		},
		Dir: func(b *testing.B) string { return b.TempDir() },
	}
}

// bareTx opens a second database next to s's with the same settings (the
// store holds its own file's lock) and returns a one-row insert
// transaction on it.
func bareTx(b *testing.B, s store.Store) func(ctx context.Context) error {
	path := filepath.Join(filepath.Dir(s.(*sqlite.Store).Path()), "bare.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE bare (id INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO bare (v) VALUES (?)", []byte("x")); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}

// BenchmarkBytesPerStep commits supersteps of a run holding 10 MB of
// unchanged state and changing 1 KB, and reports the bytes the process
// passed to write(2) per commit (WAL frames and WAL checkpoints into the
// database file, from /proc/self/io) next to the checkpoint bytes the store
// counted (CommitResult.BytesWritten).
func BenchmarkBytesPerStep(b *testing.B) { benchBytesPerStep(b, nil) }

// BenchmarkBytesPerStep4KPages is BenchmarkBytesPerStep with 4 KB pages.
func BenchmarkBytesPerStep4KPages(b *testing.B) {
	benchBytesPerStep(b, &sqlite.Options{PageSize: 4096})
}

func benchBytesPerStep(b *testing.B, opts *sqlite.Options) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bytes.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := storetest.CreateResponse(ctx, b, s, &storetest.ResponseOpts{NoCheckpoint: true})
	parts := append(storetest.Parts(10, 1<<20, 1), store.Part{Name: "changing", Data: make([]byte, 1024)})
	storetest.Commit(ctx, b, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: parts, NoEvents: true})
	var logical int64
	b.ReportAllocs()
	w0 := procWriteBytes(b)
	b.ResetTimer()
	for i := range b.N {
		parts[10].Data = binary.AppendUvarint(bytes.Repeat([]byte{0}, 1016), uint64(i))
		p := storetest.NextCommit(ctx, b, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: parts, Events: 2})
		res, err := s.Commit(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		logical += res.BytesWritten
	}
	b.StopTimer()
	b.ReportMetric(float64(procWriteBytes(b)-w0)/float64(b.N), "written-B/step")
	b.ReportMetric(float64(logical)/float64(b.N), "checkpoint-B/step")
}

// procWriteBytes returns wchar from /proc/self/io: bytes passed to write
// system calls by this process.
func procWriteBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Skip("no wchar in /proc/self/io")
	return 0
}

// BenchmarkLongConversation: a turn's finishing, pruning commit after 100
// and 1,000 turns in one run (storetest.BenchLongConversation).
func BenchmarkLongConversation(b *testing.B) {
	storetest.BenchLongConversation(b, benchHarness(nil))
}
