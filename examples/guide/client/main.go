// Command client asks the guide's server for an announcement, streaming
// the response, approves the draft it shows, and prints the posts.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func main() {
	ctx := context.Background()
	client := openai.NewClient(
		option.WithBaseURL(cmp.Or(os.Getenv("BASE_URL"), "http://127.0.0.1:8080/v1")),
		option.WithAPIKey(cmp.Or(os.Getenv("API_KEY"), "none")), // the server's key, if it has any
	)

	// 1. Stream a response: the events come as the workflow commits them.
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "announce",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("our durable workflow server")},
	})
	var first responses.Response
	for stream.Next() {
		ev := stream.Current()
		fmt.Println("event:", ev.Type)
		if ev.Type == "response.completed" {
			first = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}

	// 2. It completed with a function call: the workflow asks for approval.
	var callID string
	for _, item := range first.Output {
		if call := item.AsFunctionCall(); item.Type == "function_call" {
			fmt.Println("approval asked:", call.Arguments)
			callID = call.CallID
		}
	}
	if callID == "" {
		log.Fatalf("no approval asked in %s", first.ID)
	}

	// 3. Approve: a new response continues the run from its checkpoint.
	answer := responses.ResponseInputItemParamOfFunctionCallOutput("true")
	answer.OfFunctionCallOutput.CallID = openai.String(callID)
	final, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "announce",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{answer}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", final.Status)
	for _, item := range final.Output {
		for _, part := range item.AsMessage().Content {
			fmt.Println(part.Text)
		}
	}
}
