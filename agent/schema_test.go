package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
)

type Base struct {
	ID string `json:"id"`
}

type searchArgs struct {
	Base
	Query    string            `json:"query" description:"what to look for"`
	Limit    int               `json:"limit,omitempty"`
	Score    float64           `json:"score"`
	Exact    *bool             `json:"exact"`
	Tags     []string          `json:"tags"`
	Raw      []byte            `json:"raw,omitzero"`
	Labels   map[string]int    `json:"labels"`
	When     time.Time         `json:"when"`
	Any      any               `json:"any"`
	Nested   struct{ N uint8 } `json:"nested"`
	Skipped  string            `json:"-"`
	NoTag    string
	internal string
}

func TestSchema_Struct(t *testing.T) {
	got, err := agent.Schema(reflect.TypeFor[searchArgs]())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{` +
		`"NoTag":{"type":"string"},"any":{},"exact":{"type":"boolean"},"id":{"type":"string"},` +
		`"labels":{"additionalProperties":{"type":"integer"},"type":"object"},"limit":{"type":"integer"},` +
		`"nested":{"additionalProperties":false,"properties":{"N":{"type":"integer"}},"required":["N"],"type":"object"},` +
		`"query":{"description":"what to look for","type":"string"},"raw":{"type":"string"},"score":{"type":"number"},` +
		`"tags":{"items":{"type":"string"},"type":"array"},"when":{"format":"date-time","type":"string"}},` +
		`"required":["id","query","score","tags","labels","when","any","nested","NoTag"],"type":"object"}`
	b, _ := json.Marshal(got)
	if string(b) != want {
		t.Fatalf("schema\n%s\nwant\n%s", b, want)
	}
}

type node struct {
	Next *node `json:"next"`
}

func TestSchema_Errors(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[node](), reflect.TypeFor[map[int]string](), reflect.TypeFor[struct{ C chan int }]()} {
		if _, err := agent.Schema(typ); !errors.Is(err, agent.ErrSchema) {
			t.Errorf("%v: err %v", typ, err)
		}
	}
	if _, err := agent.NewTool("bad", "", func(_ context.Context, _ struct{ F func() }) (string, error) { return "", nil }); !errors.Is(err, agent.ErrSchema) {
		t.Fatalf("NewTool: %v", err)
	}
}
