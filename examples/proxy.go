package examples

import (
	"context"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/superstep/superstep/agent"
)

// ProxyAgent returns a ChatAgent for the model id on the model server of o,
// with no instructions and no tools of its own. Hosted as a plain agent
// (host.RegisterAgent), it makes that model durable: background mode,
// stream resume, cancel, crash-safe streaming and conversations, with the
// request's model settings (client tools, tool_choice, sampling, text
// format; see agent.ModelParams) passed on. Of the request's metadata,
// only ModelMetadataKeys reach the model server, as for the LLM demos.
func ProxyAgent(o *LLMOptions, id string) (*agent.ChatAgent, error) {
	if o == nil || (o.BaseURL == "" && o.APIKey == "") {
		return nil, errors.New("examples: proxy: no model server (LLMOptions.BaseURL and APIKey are empty)")
	}
	if id == "" {
		return nil, errors.New("examples: proxy: empty model id")
	}
	return agent.NewChatAgent(&agent.Options{Name: id, Model: id, BaseURL: o.BaseURL, APIKey: o.APIKey,
		HTTPClient: o.HTTPClient, API: o.API, Retry: o.Retry, MetadataFrom: modelMetadata(id)})
}

// ListModels returns the model ids o's model server lists (GET /models).
func ListModels(ctx context.Context, o *LLMOptions) ([]string, error) {
	opts := []option.RequestOption{option.WithMaxRetries(2)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	client := openai.NewClient(opts...)
	var ids []string
	pager := client.Models.ListAutoPaging(ctx)
	for pager.Next() {
		ids = append(ids, pager.Current().ID)
	}
	if err := pager.Err(); err != nil {
		return nil, fmt.Errorf("examples: list the model server's models: %w", err)
	}
	return ids, nil
}
