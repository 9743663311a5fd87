package localmodel_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/localmodel"
)

// server starts the local model with no token delay.
func server(t testing.TB, opts *localmodel.Options) *httptest.Server {
	t.Helper()
	if opts == nil {
		opts = &localmodel.Options{}
	}
	opts.TokenDelay = -1
	srv := httptest.NewServer(localmodel.NewHandler(opts))
	t.Cleanup(srv.Close)
	return srv
}

// post sends a JSON body and returns the response body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sseData returns the data payloads of an SSE body.
func sseData(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestChat_NonStreaming(t *testing.T) {
	srv := server(t, nil)
	code, body := post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hello there"}]}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var got struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "Echo: hello there" || got.Choices[0].FinishReason != "stop" {
		t.Fatalf("reply %+v", got)
	}
	if got.Usage.TotalTokens != 5 { // prompt "hello there" = 2, reply "Echo:"," hello"," there" = 3
		t.Fatalf("usage %s", body)
	}
}

func TestChat_StreamingTokensUsageDone(t *testing.T) {
	srv := server(t, nil)
	_, body := post(t, srv.URL+"/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},
		"metadata":{"reply":"one two three"},"messages":[{"role":"user","content":"x"}]}`)
	data := sseData(body)
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("no [DONE]: %q", data)
	}
	var text strings.Builder
	finish, usage := "", 0
	for _, d := range data[:len(data)-1] {
		var c struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if finish != "" {
				t.Fatal("content after finish")
			}
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text.String() != "one two three" || finish != "stop" || usage != 3 {
		t.Fatalf("text %q finish %q usage %d", text.String(), finish, usage)
	}
}

func TestChat_ToolCallByName(t *testing.T) {
	srv := server(t, nil)
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	_, body := post(t, srv.URL+"/v1/chat/completions", `{"model":"m",`+tools+`,
		"messages":[{"role":"user","content":"use get_weather {\"city\":\"Paris\"}"}]}`)
	if !strings.Contains(body, `"finish_reason":"tool_calls"`) || !strings.Contains(body, `"name":"get_weather"`) ||
		!strings.Contains(body, `"arguments":"{\"city\":\"Paris\"}"`) {
		t.Fatalf("no tool call: %s", body)
	}
	_, body = post(t, srv.URL+"/v1/chat/completions", `{"model":"m",`+tools+`,"messages":[
		{"role":"user","content":"use get_weather"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`)
	if !strings.Contains(body, `"content":"Tool get_weather returned: sunny"`) {
		t.Fatalf("no tool answer: %s", body)
	}
}

func TestChat_FinishReasons(t *testing.T) {
	srv := server(t, nil)
	_, body := post(t, srv.URL+"/v1/chat/completions", `{"model":"m","max_tokens":2,"metadata":{"reply":"a b c d"},"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(body, `"content":"a b"`) || !strings.Contains(body, `"finish_reason":"length"`) {
		t.Fatalf("length: %s", body)
	}
	_, body = post(t, srv.URL+"/v1/chat/completions", `{"model":"m","metadata":{"finish_reason":"content_filter"},"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(body, `"finish_reason":"content_filter"`) {
		t.Fatalf("content_filter: %s", body)
	}
	code, _ := post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[]}`)
	if code != 400 {
		t.Fatalf("empty messages: status %d", code)
	}
}

// The Responses API stream, read by openai-go: contiguous sequence numbers,
// deltas that add up to the final text, usage on the terminal event.
func TestResponses_StreamWithOpenAIGo(t *testing.T) {
	srv := server(t, nil)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	st := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("good morning")},
	})
	defer st.Close()
	var (
		types  []string
		deltas strings.Builder
		final  responses.Response
	)
	for i := int64(0); st.Next(); i++ {
		ev := st.Current()
		if ev.SequenceNumber != i {
			t.Fatalf("event %d has sequence %d", i, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.Delta)
		}
		if ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	if deltas.String() != "Echo: good morning" || final.OutputText() != deltas.String() || final.Usage.OutputTokens != 3 || final.Usage.TotalTokens != 5 {
		t.Fatalf("deltas %q final %q usage %+v", deltas.String(), final.OutputText(), final.Usage)
	}
}

func TestResponses_IncompleteAndToolCall(t *testing.T) {
	srv := server(t, nil)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	r, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "m", MaxOutputTokens: openai.Int(1),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a b c")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.OutputText() != "Echo:" {
		t.Fatalf("incomplete: %s %+v %q", r.Status, r.IncompleteDetails, r.OutputText())
	}
	r, err = client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "m", Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("lookup", map[string]any{"type": "object"}, false)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`please lookup {"q":1}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	fc := r.Output[0].AsFunctionCall()
	if r.Output[0].Type != "function_call" || fc.Name != "lookup" || fc.Arguments != `{"q":1}` || fc.CallID != "call_1" {
		t.Fatalf("tool call: %+v", r.Output)
	}
}

func TestStart_ServesModels(t *testing.T) {
	s, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{Models: []string{"echo-a", "echo-b"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":"echo-a"`) || !strings.Contains(string(b), `"id":"echo-b"`) {
		t.Fatalf("models %s", b)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(s.URL + "/models"); err == nil {
		t.Fatal("served after Close")
	}
}
