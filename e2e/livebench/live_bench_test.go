package livebench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// tokensPerResponse is the length of each benchmark reply.
const tokensPerResponse = 256

// BenchmarkLiveTokens streams replies of tokensPerResponse tokens (model
// token delay 0) over HTTP with openai-go, one at a time and 64 at once,
// on SQLite and PostgreSQL. Every iteration runs one round of each way of
// serving (raw model stream, superstep live, superstep committed), in
// rotating order, and the benchmark reports each one's tokens/s, their
// ratios, and the per-token latency from the executor emitting a token to
// the client reading its frame (p50/p99; in committed mode a token waits
// for its superstep's commit). ns/op and allocs/op are for the whole
// iteration, all three rounds, client and server (they share the process).
func BenchmarkLiveTokens(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, conc := range []int{1, 64} {
			b.Run(fmt.Sprintf("store=%s/conc=%d", kind, conc), func(b *testing.B) {
				benchLive(b, kind, conc)
			})
		}
	}
}

// benchLive is one cell of BenchmarkLiveTokens.
func benchLive(b *testing.B, kind string, conc int) {
	r := newRig(b, kind)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// One unmeasured round of each mode: connections, statements, caches.
	for _, mode := range modes {
		if _, _, err := r.round(ctx, mode, "warm-"+mode, conc, 8); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := map[string]time.Duration{}
	lat := map[string][]time.Duration{}
	tokens := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for k := range modes {
			mode := modes[(i+k)%len(modes)]
			d, res, err := r.round(ctx, mode, fmt.Sprintf("%s.%d", mode, i), conc, tokensPerResponse)
			if err != nil {
				b.Fatal(err)
			}
			elapsed[mode] += d
			for _, x := range res {
				lat[mode] = append(lat[mode], x.lat...)
			}
		}
		tokens += conc * tokensPerResponse
	}
	b.StopTimer()
	rate := map[string]float64{}
	for _, mode := range modes {
		rate[mode] = float64(tokens) / elapsed[mode].Seconds()
		b.ReportMetric(rate[mode], mode+"-tok/s")
	}
	b.ReportMetric(rate[modeLive]/rate[modeRaw], "live/raw")
	b.ReportMetric(rate[modeCommitted]/rate[modeRaw], "committed/raw")
	b.ReportMetric(rate[modeLive]/rate[modeCommitted], "live/committed")
	for _, mode := range []string{modeLive, modeCommitted} {
		ds := sortedCopy(lat[mode])
		b.ReportMetric(float64(quantile(ds, 0.5).Microseconds()), mode+"-p50-µs")
		b.ReportMetric(float64(quantile(ds, 0.99).Microseconds()), mode+"-p99-µs")
	}
	if h := r.livePublish(); h != nil && h.GetSampleCount() > 0 {
		b.ReportMetric(h.GetSampleSum()/float64(h.GetSampleCount())*1e6, "publish-mean-µs")
		b.ReportMetric(float64(bucketQuantile(h, 0.5).Microseconds()), "publish-p50-µs")
		b.ReportMetric(float64(bucketQuantile(h, 0.99).Microseconds()), "publish-p99-µs")
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", strings.TrimSpace(string(la)))
	}
}

// TestLiveBench_Rig runs the benchmark's rounds once, small, on both
// stores: every token of every reply arrives, in live mode as one frame per
// token with an emission stamp each, in committed mode in one frame after
// the commit.
func TestLiveBench_Rig(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const conc, n = 4, 24
			for _, mode := range modes {
				_, res, err := r.round(ctx, mode, "t-"+mode, conc, n)
				if err != nil {
					t.Fatal(err)
				}
				for i, x := range res {
					switch mode {
					case modeRaw, modeLive:
						if x.deltas != n {
							t.Errorf("%s stream %d: %d delta frames, want one per token (%d)", mode, i, x.deltas, n)
						}
					case modeCommitted:
						if x.deltas >= n {
							t.Errorf("committed stream %d: %d delta frames, want the reply in fewer than its %d tokens", i, x.deltas, n)
						}
					}
					if mode != modeRaw && len(x.lat) != n {
						t.Errorf("%s stream %d: %d tokens matched to an emission stamp, want %d", mode, i, len(x.lat), n)
					}
				}
			}
		})
	}
}
