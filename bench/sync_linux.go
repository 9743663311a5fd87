//go:build linux

package main

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (not its metadata unless needed) to disk.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
