// Package serve runs the server `superstep serve` runs, around your own
// workflows: the Responses API over a durable store, with its auth,
// limits, metrics, retention, webhooks, web console and multi-host
// leases. A program that hosts a workflow is a dozen lines:
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		defer stop()
//		err := serve.Run(ctx, &serve.Config{
//			Addr: "127.0.0.1:8080",
//			DB:   "app.db", // or postgres://user@host/db: hosts sharing it share the runs
//			Workflows: func(model agent.Options) ([]*workflow.Workflow, error) {
//				wf, err := NewTripWorkflow(model) // hosted as model "trip"
//				return []*workflow.Workflow{wf}, err
//			},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Config has one field per flag of `superstep serve`; its zero fields take
// the flags' defaults. Run serves until ctx ends, then shuts down
// gracefully: running supersteps get Config.Grace to commit; what is left
// resumes from its last commit when a server starts again on the same
// database (or at once on another host sharing it).
//
// Workflows are registered under their names (workflow.NewBuilder's). The
// model connection handed to Config.Workflows carries Config.ModelServer
// (ModelServerLocal starts the deterministic local model in process,
// offline), ModelAPIKey, Model and ModelAPI: copy it into the
// agent.Options of each agent.NewChatAgent. Config.Register gets the
// host itself, for agents and publication modes.
//
// The command adds what is a command's business: flags and environment
// variables, key files, log format, OpenTelemetry exporters from the
// OTEL_* variables (a program embedding serve sets Config.TracerProvider),
// and the demos.
package serve
