package sqlite

import "fmt"

// ownBytes scans a BLOB column into *p without the copy database/sql
// makes for a *[]byte destination (bytes.Clone of the driver's value):
// mattn/go-sqlite3 returns each row's blob in a slice of its own
// (C.GoBytes, made for that row and column and never written again), so
// the bytes are copied once, out of SQLite, instead of twice. Reading an
// 8 MiB request's row allocated 2 x 10 MB before. NULL scans as nil, an
// empty blob as an empty non-nil slice, TEXT as its bytes, as for a
// *[]byte. TestOwnBytes_NotReused checks the driver's side of this.
type ownBytes struct{ p *[]byte }

// Scan implements sql.Scanner.
func (o ownBytes) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*o.p = nil
	case []byte:
		*o.p = v
	case string:
		*o.p = []byte(v)
	default:
		return fmt.Errorf("sqlite: cannot scan %T into bytes", src)
	}
	return nil
}
