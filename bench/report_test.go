package main

import (
	"io"
	"os"
	"testing"
)

// TestPrintWritesNoFiles: -print prints the report and leaves
// results.json (which the committed docs render from) alone.
func TestPrintWritesNoFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := (&report{}).write(&config{printOnly: true}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("results.json"); !os.IsNotExist(err) {
		t.Fatalf("-print wrote results.json (stat: %v)", err)
	}
}
