package migration

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadOrdersByVersion(t *testing.T) {
	fsys := fstest.MapFS{
		"m/010_ten.up.sql":     {Data: []byte("-- 10")},
		"m/002_two.up.sql":     {Data: []byte("-- 2")},
		"m/001_initial.up.sql": {Data: []byte("-- 1")},
		"m/README.md":          {Data: []byte("not a migration")},
		"m/003_three.down.sql": {Data: []byte("not an up migration")},
		"other/004_x.up.sql":   {Data: []byte("another directory")},
		"m/003_three_b.up.sql": {Data: []byte("-- 3")},
		"m/004_four.up.sql":    {Data: []byte("-- 4")},
		"m/005_five.up.sql":    {Data: []byte("-- 5")},
		"m/006_six.up.sql":     {Data: []byte("-- 6")},
		"m/007_seven.up.sql":   {Data: []byte("-- 7")},
		"m/008_eight.up.sql":   {Data: []byte("-- 8")},
		"m/009_nine.up.sql":    {Data: []byte("-- 9")},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 10 {
		t.Fatalf("loaded %d migrations, want 10: %+v", len(ms), ms)
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Fatalf("migration %d has version %d", i, m.Version)
		}
	}
	// Sorted numerically, not by name: 010 after 009 either way, so check
	// a name and its SQL travel together.
	if m := ms[2]; m.Name != "three_b" || m.File != "003_three_b.up.sql" || m.SQL != "-- 3" {
		t.Fatalf("migration 3 = %+v", m)
	}
	if m := ms[9]; m.Name != "ten" || m.SQL != "-- 10" {
		t.Fatalf("migration 10 = %+v", m)
	}
}

func TestLoadRejects(t *testing.T) {
	cases := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"Gap", fstest.MapFS{"m/001_a.up.sql": {}, "m/003_c.up.sql": {}}, "want version 2"},
		{"NotFromOne", fstest.MapFS{"m/002_b.up.sql": {}}, "want version 1"},
		{"Duplicate", fstest.MapFS{"m/001_a.up.sql": {}, "m/001_b.up.sql": {}}, "want version 2"},
		{"BadVersion", fstest.MapFS{"m/one_a.up.sql": {}}, "bad version"},
		{"NoName", fstest.MapFS{"m/001.up.sql": {}}, "want NNN_name"},
		{"Empty", fstest.MapFS{"m/notes.txt": {}}, "no *.up.sql"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.fsys, "m")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
