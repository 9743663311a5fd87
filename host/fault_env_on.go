//go:build faults && unix

package host

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

// faultFromEnv returns the FaultFunc FaultEnv asks for (nil when unset).
// A bad value is reported on stderr and ignored.
func faultFromEnv() func(context.Context, *Fault) error {
	v := os.Getenv(FaultEnv)
	if v == "" {
		return nil
	}
	f, err := parseEnvFault(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil
	}
	return f.hook(func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	})
}
