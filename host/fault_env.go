package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// FaultEnv names the environment variable a binary built with -tags faults
// reads for one fault to inject: "<point>[@<n>][:fail|:crash]" fires at the
// n-th arrival (from 1; default 1) at the point; "fail" (the default)
// injects an error, "crash" kills the process there with SIGKILL. In a
// normal build the variable is ignored.
const FaultEnv = "SUPERSTEP_HOST_FAULT"

// envFault is one fault parsed from FaultEnv.
type envFault struct {
	point FaultPoint
	nth   int64
	crash bool
	seen  atomic.Int64
}

// parseEnvFault parses a FaultEnv value.
func parseEnvFault(v string) (*envFault, error) {
	f := &envFault{nth: 1}
	spec, mode, hasMode := strings.Cut(v, ":")
	if hasMode {
		switch mode {
		case "fail":
		case "crash":
			f.crash = true
		default:
			return nil, fmt.Errorf("host: %s=%q: mode must be fail or crash", FaultEnv, v)
		}
	}
	point, nth, hasNth := strings.Cut(spec, "@")
	if hasNth {
		n, err := strconv.ParseInt(nth, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("host: %s=%q: arrival must be a number >= 1", FaultEnv, v)
		}
		f.nth = n
	}
	for _, p := range FaultPoints() {
		if string(p) == point {
			f.point = p
			return f, nil
		}
	}
	return nil, fmt.Errorf("host: %s=%q: unknown fault point %q", FaultEnv, v, point)
}

var errEnvFault = errors.New("host: fault injected through " + FaultEnv)

// hook returns the FaultFunc of f; kill ends the process.
func (f *envFault) hook(kill func()) func(context.Context, *Fault) error {
	return func(_ context.Context, at *Fault) error {
		if at.Point != f.point || f.seen.Add(1) != f.nth {
			return nil
		}
		if f.crash {
			kill()
		}
		return errEnvFault
	}
}
