package host

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/superstep/superstep/internal/fault"
)

// CommitBackoffMaxDefault is the default Config.CommitBackoffMax: a store
// back after an outage is written to within about this long.
const CommitBackoffMaxDefault = 2 * time.Second

// WithDefaults returns a copy of c (which may be nil) with every zero field
// set to its default.
func (c *Config) WithDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.HostID == "" {
		name, _ := os.Hostname()
		out.HostID = fmt.Sprintf("%s-%d-%s", name, os.Getpid(), randomHex(4))
	}
	if out.LeaseDuration == 0 {
		out.LeaseDuration = LeaseDurationDefault
	}
	if out.MaxSupersteps == 0 {
		out.MaxSupersteps = MaxSuperstepsDefault
	}
	if out.CommitRetries == 0 {
		out.CommitRetries = CommitRetriesDefault
	}
	if out.CommitRetries < 0 {
		out.CommitRetries = 0
	}
	if out.CommitBackoff == 0 {
		out.CommitBackoff = CommitBackoffDefault
	}
	if out.CommitBackoffMax == 0 {
		out.CommitBackoffMax = CommitBackoffMaxDefault
	}
	if out.CommitBackoffMax > 0 && out.CommitBackoffMax < out.CommitBackoff {
		out.CommitBackoffMax = out.CommitBackoff
	}
	if out.ClaimInterval == 0 {
		out.ClaimInterval = min(out.LeaseDuration/3, ClaimIntervalMax)
	}
	if out.ResumeBackoff == 0 {
		out.ResumeBackoff = ResumeBackoffDefault
	}
	if out.ResumeBackoffMax == 0 {
		out.ResumeBackoffMax = max(ResumeBackoffMaxDefault, out.ResumeBackoff)
	}
	if out.CancelPollInterval == 0 {
		out.CancelPollInterval = CancelPollDefault
	}
	if out.KeepCheckpoints == 0 {
		out.KeepCheckpoints = KeepCheckpointsDefault
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Test.FaultFunc == nil {
		out.Test.FaultFunc = fault.FromEnv(FaultEnv, FaultPoints()) // nil unless built with -tags faults
	}
	return out
}

// validate names the first invalid field of a defaulted config.
func (c *Config) validate() error {
	var errs []error
	if c.LeaseDuration < 0 {
		errs = append(errs, fmt.Errorf("host: Config.LeaseDuration must be positive, got %v", c.LeaseDuration))
	}
	if c.MaxSupersteps < 0 {
		errs = append(errs, fmt.Errorf("host: Config.MaxSupersteps must be positive, got %d", c.MaxSupersteps))
	}
	if c.ClaimInterval < 0 {
		errs = append(errs, fmt.Errorf("host: Config.ClaimInterval must be positive, got %v", c.ClaimInterval))
	}
	if c.MaxRuns < 0 {
		errs = append(errs, fmt.Errorf("host: Config.MaxRuns must not be negative, got %d", c.MaxRuns))
	}
	if c.CommitBackoff < 0 {
		errs = append(errs, fmt.Errorf("host: Config.CommitBackoff must be positive, got %v", c.CommitBackoff))
	}
	if c.CommitBackoffMax < 0 {
		errs = append(errs, fmt.Errorf("host: Config.CommitBackoffMax must be positive, got %v", c.CommitBackoffMax))
	}
	if c.ResumeBackoff < 0 || c.ResumeBackoffMax < c.ResumeBackoff {
		errs = append(errs, fmt.Errorf("host: Config.ResumeBackoff (%v) must be positive and at most ResumeBackoffMax (%v)",
			c.ResumeBackoff, c.ResumeBackoffMax))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("host: Config.Retention must not be negative, got %v", c.Retention))
	}
	return errors.Join(errs...)
}

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// newID returns a fresh id with the given prefix ("resp_", "run_").
func newID(prefix string) string { return prefix + randomHex(16) }
