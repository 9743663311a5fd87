package agent_test

import (
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
)

// BenchmarkChatAgent_Tokens streams a 256-token reply from the local model
// server (token delay 0) through openai-go and ChatAgent; it reports tokens/s.
func BenchmarkChatAgent_Tokens(b *testing.B) {
	reply := strings.TrimSpace(strings.Repeat("tok ", 256))
	for _, api := range apis {
		b.Run(string(api), func(b *testing.B) {
			a := newChat(b, localURL(b, nil), api, func(o *agent.Options) { o.Metadata = map[string]string{"reply": reply} })
			b.ReportAllocs()
			tokens := 0
			for b.Loop() {
				for u, err := range a.Run(b.Context(), nil, []agent.Message{user("go")}) {
					if err != nil {
						b.Fatal(err)
					}
					if u.Kind == agent.UpdateTextDelta {
						tokens++
					}
				}
			}
			if tokens != 256*b.N {
				b.Fatalf("%d tokens for %d turns", tokens, b.N)
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
