package sqlite

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestOwnBytes_NotReused: the blobs ownBytes keeps (the driver's values,
// not copies) stay as they were read while later rows and queries are
// read on the same connection, through Rows and through Row; and NULL,
// empty and TEXT values scan as into a *[]byte. A driver that reused its
// buffers would fail here before the store returned damaged bytes.
func TestOwnBytes_NotReused(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // every read on the one connection
	if _, err := db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]byte{}
	for k := range int64(4) {
		v := bytes.Repeat([]byte{byte('a' + k)}, 5000*int(k+1)) // overflow pages from the second on
		want[k] = v
		if _, err := db.Exec("INSERT INTO t (k, v) VALUES (?, ?)", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO t (k, v) VALUES (10, NULL), (11, x''), (12, 'text')"); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	rows, err := db.Query("SELECT v FROM t WHERE k < 4 ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v []byte
		if err := rows.Scan(ownBytes{&v}); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for k := range int64(4) {
		var v []byte
		if err := db.QueryRow("SELECT v FROM t WHERE k = ?", 3-k).Scan(ownBytes{&v}); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	for i, v := range got {
		k := int64(i)
		if i >= 4 {
			k = int64(7 - i)
		}
		if !bytes.Equal(v, want[k]) {
			t.Fatalf("read %d (row %d): %d bytes that are not the row's %d", i, k, len(v), len(want[k]))
		}
	}
	for _, c := range []struct {
		k    int64
		want []byte
	}{{10, nil}, {11, []byte{}}, {12, []byte("text")}} {
		var v, plain []byte
		if err := db.QueryRow("SELECT v, v FROM t WHERE k = ?", c.k).Scan(ownBytes{&v}, &plain); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v, c.want) || (v == nil) != (c.want == nil) || (v == nil) != (plain == nil) || !bytes.Equal(v, plain) {
			t.Fatalf("row %d: scanned %q (nil %v), a *[]byte %q (nil %v)", c.k, v, v == nil, plain, plain == nil)
		}
	}
}
