// Command drivercmp compares the SQLite drivers modernc.org/sqlite and
// github.com/mattn/go-sqlite3 on the statements of a superstep commit; see
// docs/sqlite-driver.md. It lives in the bench module so that the main
// module does not require modernc.org/sqlite. Run from bench/:
//
//	go run ./drivercmp [FULL|NORMAL|OFF]
package main

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "github.com/mattn/go-sqlite3"
	_ "modernc.org/sqlite"
)

func open(driver, path, sync string) *sql.DB {
	var dsn string
	if driver == "sqlite3" {
		dsn = "file:" + path + "?_journal_mode=WAL&_synchronous=" + sync + "&_busy_timeout=5000"
	} else {
		dsn = "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=busy_timeout(5000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, v BLOB)",
		"CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, last INTEGER, epoch INTEGER)",
		"CREATE TABLE IF NOT EXISTS responses (id TEXT PRIMARY KEY, next INTEGER, snap BLOB)",
		"CREATE TABLE IF NOT EXISTS events (rid TEXT, seq INTEGER, typ TEXT, payload BLOB, PRIMARY KEY(rid,seq)) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS cps (rid TEXT, step INTEGER, parts BLOB, PRIMARY KEY(rid,step)) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS blobs (hash BLOB PRIMARY KEY, data BLOB) WITHOUT ROWID",
	} {
		if _, err := db.Exec(q); err != nil {
			panic(err)
		}
	}
	for i := 0; i < 64; i++ {
		db.Exec("INSERT OR IGNORE INTO runs VALUES (?,0,1)", fmt.Sprint("run", i))
		db.Exec("INSERT OR IGNORE INTO responses VALUES (?,0,'{}')", fmt.Sprint("resp", i))
	}
	return db
}

func commitStmts(tx *sql.Tx, r int, step int) {
	must := func(_ sql.Result, err error) {
		if err != nil {
			panic(err)
		}
	}
	run, resp := fmt.Sprint("run", r), fmt.Sprint("resp", r)
	h := make([]byte, 32)
	rand.Read(h)
	data := make([]byte, 1024)
	rand.Read(data)
	must(tx.Exec("UPDATE runs SET last=? WHERE id=? AND epoch=1", step, run))
	must(tx.Exec("INSERT INTO blobs VALUES (?,?) ON CONFLICT DO NOTHING", h, data))
	must(tx.Exec("INSERT INTO cps VALUES (?,?,?)", run, step, h))
	must(tx.Exec("INSERT INTO events VALUES (?,?,?,?)", resp, 2*step, "delta", []byte(`{"type":"x","sequence_number":1,"delta":"hello"}`)))
	must(tx.Exec("INSERT INTO events VALUES (?,?,?,?)", resp, 2*step+1, "delta", []byte(`{"type":"x","sequence_number":1,"delta":"hello"}`)))
	must(tx.Exec("UPDATE responses SET next=?, snap=? WHERE id=?", 2*step+2, []byte(`{"id":"resp","status":"in_progress"}`), resp))
}

func main() {
	dir, _ := os.MkdirTemp("/tmp", "drv")
	defer os.RemoveAll(dir)
	sync := "FULL"
	if len(os.Args) > 1 {
		sync = os.Args[1]
	}
	// raw fsync
	f, _ := os.Create(filepath.Join(dir, "raw"))
	buf := make([]byte, 4096)
	n := 500
	t0 := time.Now()
	for i := 0; i < n; i++ {
		f.WriteAt(buf, int64(i)*4096)
		f.Sync()
	}
	fmt.Printf("raw write+fsync: %v/op\n", time.Since(t0)/time.Duration(n))
	for _, drv := range []string{"sqlite3", "sqlite"} {
		db := open(drv, filepath.Join(dir, drv+".db"), sync)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			tx, _ := db.Begin()
			if _, err := tx.Exec("INSERT INTO bare(v) VALUES (?)", []byte("x")); err != nil {
				panic(err)
			}
			if err := tx.Commit(); err != nil {
				panic(err)
			}
		}
		bare := time.Since(t0) / time.Duration(n)
		t0 = time.Now()
		for i := 0; i < n; i++ {
			tx, _ := db.Begin()
			commitStmts(tx, 0, i+1)
			tx.Commit()
		}
		one := time.Since(t0) / time.Duration(n)
		// group commit: 64 per tx with savepoints
		batches := 40
		t0 = time.Now()
		for b := 0; b < batches; b++ {
			tx, _ := db.Begin()
			for r := 1; r < 64; r++ {
				tx.Exec("SAVEPOINT c")
				commitStmts(tx, r, b+1)
				tx.Exec("RELEASE c")
			}
			tx.Commit()
		}
		group := time.Since(t0) / time.Duration(batches*63)
		// cpu only: no fsync
		db.Exec("PRAGMA synchronous=OFF")
		t0 = time.Now()
		for i := 0; i < n; i++ {
			tx, _ := db.Begin()
			commitStmts(tx, 0, 1000+i)
			tx.Commit()
		}
		cpu := time.Since(t0) / time.Duration(n)
		fmt.Printf("%-8s bare-tx %v  commit-tx %v (%.2fx)  group64 %v/commit  commit-cpu(sync off) %v\n", drv, bare, one, float64(one)/float64(bare), group, cpu)
		db.Close()
	}
}
