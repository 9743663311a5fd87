//go:build !linux

package main

import "os"

// fdatasync falls back to Sync where fdatasync is missing.
func fdatasync(f *os.File) error { return f.Sync() }
