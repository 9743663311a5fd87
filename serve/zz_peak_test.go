package serve_test

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"testing"
	"time"
)

func TestZZPeak(t *testing.T) {
	runtime.MemProfileRate = 4096
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	base, stop := startBig(t)
	defer stop()
	text := bigText(8 << 20)
	body, _ := json.Marshal(map[string]any{"model": "echo", "input": text, "stream": os.Getenv("ZZ_STREAM") == "1"})
	postDiscard(t, base+"/v1/responses", body) // warm
	runtime.GC()
	done := make(chan struct{})
	var max uint64
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > max {
				max = v
				f, _ := os.Create("/tmp/peak.heap")
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	postDiscard(t, base+"/v1/responses", body)
	close(done)
	t.Logf("max live %d MB", max>>20)
}
