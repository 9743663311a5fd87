//go:build !faults || !unix

package host

import "context"

// faultFromEnv returns nil: FaultEnv is read only with -tags faults.
func faultFromEnv() func(context.Context, *Fault) error { return nil }
