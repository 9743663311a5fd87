package agent_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/localmodel"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// A ChatAgent with one tool, against the deterministic local model server
// (which calls a tool when the prompt names it).
func ExampleChatAgent() {
	srv := httptest.NewServer(localmodel.NewHandler(&localmodel.Options{TokenDelay: -1}))
	defer srv.Close()
	add := agent.MustTool("add", "adds two numbers", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil })
	a, err := agent.NewChatAgent(&agent.Options{BaseURL: srv.URL + "/v1", APIKey: "local", Model: "local-echo", Tools: []*agent.Tool{add}})
	if err != nil {
		fmt.Println(err)
		return
	}
	in := []agent.Message{{Role: agent.RoleUser, Text: `please add {"a":2,"b":3}`}}
	for u, err := range a.Run(context.Background(), nil, in) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case u.Kind == agent.UpdateToolCall:
			fmt.Println("call:", u.Name, u.Arguments)
		case u.Kind == agent.UpdateToolResult:
			fmt.Println("result:", u.Text)
		case u.Kind == agent.UpdateText:
			fmt.Println("reply:", u.Text)
		case u.Kind == agent.UpdateDone:
			fmt.Println("tokens:", u.Usage.TotalTokens)
		}
	}
	// Output:
	// call: add {"a":2,"b":3}
	// result: 5
	// reply: Tool add returned: 5
	// tokens: 14
}
