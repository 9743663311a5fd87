// Package migration loads the numbered schema migrations that store/sqlite
// and store/postgres embed, so that both backends agree on how a migration
// file is named, ordered and checked.
//
// A migration is a file NNN_name.up.sql in one directory of an fs.FS.
// Versions start at 1 and are contiguous: a gap would mean a file was lost
// or misnamed, and applying the rest would leave a schema no build expects.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// suffix ends every migration file name.
const suffix = ".up.sql"

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string // the part of the file name after "NNN_", without suffix
	File    string // the file name, e.g. "001_initial.up.sql"
	SQL     string
}

// Load reads the migrations in dir of fsys, in version order. Versions
// must be contiguous from 1 and a file name must start with its version
// and an underscore.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*"+suffix))
	if err != nil {
		return nil, fmt.Errorf("migration: list %s: %w", dir, err)
	}
	ms := make([]Migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		num, rest, ok := strings.Cut(strings.TrimSuffix(base, suffix), "_")
		if !ok || rest == "" {
			return nil, fmt.Errorf("migration: %s: want NNN_name%s", base, suffix)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration: %s: bad version: %w", base, err)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migration: %s: %w", base, err)
		}
		ms = append(ms, Migration{Version: v, Name: rest, File: base, SQL: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migration: no *%s files in %s", suffix, dir)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration: %s: want version %d (versions are contiguous from 1)", m.File, i+1)
		}
	}
	return ms, nil
}
