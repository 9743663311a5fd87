package host_test

import (
	"testing"
	"time"

	"github.com/superstep/superstep/host"
)

// The default claim interval is a third of the lease, capped, so that a
// dead host's runs are claimed soon after their leases expire even with a
// long lease.
func TestConfig_ClaimIntervalDefault(t *testing.T) {
	for _, c := range []struct{ lease, claim, want time.Duration }{
		{0, 0, host.ClaimIntervalMax},                        // 15s lease: capped
		{time.Hour, 0, host.ClaimIntervalMax},                // capped
		{1500 * time.Millisecond, 0, 500 * time.Millisecond}, // a third
		{time.Hour, 5 * time.Minute, 5 * time.Minute},        // set: kept
	} {
		got := (&host.Config{LeaseDuration: c.lease, ClaimInterval: c.claim}).WithDefaults().ClaimInterval
		if got != c.want {
			t.Errorf("lease %v, ClaimInterval %v: default %v, want %v", c.lease, c.claim, got, c.want)
		}
	}
}
