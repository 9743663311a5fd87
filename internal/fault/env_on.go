//go:build faults && unix

package fault

import (
	"fmt"
	"os"
	"syscall"
)

// FromEnv returns the Func of the Spec in the environment variable env,
// whose point must be one of points; nil when env is unset. A bad value is
// reported on stderr and ignored. The "crash" mode SIGKILLs the process.
// Only a binary built with -tags faults (on Unix) reads env; otherwise
// FromEnv returns nil.
func FromEnv(env string, points []Name) Func {
	v := os.Getenv(env)
	if v == "" {
		return nil
	}
	s, err := ParseSpec(v, points)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", env, err)
		return nil
	}
	return s.Func(kill)
}

// kill ends the process at once, as a crash does: no deferred call, no
// flush, no graceful shutdown.
func kill() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
