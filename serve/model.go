package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/internal/dburl"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// openStore opens db: a postgres:// URL selects PostgreSQL, anything else
// is a SQLite file path. noGroupCommit is PostgreSQL's
// Options.NoGroupCommit.
func openStore(ctx context.Context, db string, noGroupCommit bool) (store.Store, error) {
	if dburl.IsPostgres(db) {
		return postgres.Open(ctx, db, &postgres.Options{NoGroupCommit: noGroupCommit})
	}
	return sqlite.Open(ctx, db, nil)
}

// startModel returns the model connection of cfg for the hosted agents,
// starting the local model server for ModelServerLocal; the returned func
// stops it and closes the agents' idle model connections.
func startModel(cfg *Config) (agent.Options, func(), error) {
	// The agents' own transport, so that its connections end with Run.
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	o := agent.Options{BaseURL: cfg.ModelServer, APIKey: cfg.ModelAPIKey, Model: cfg.Model, API: cfg.ModelAPI, HTTPClient: client}
	if cfg.ModelServer != ModelServerLocal {
		return o, client.CloseIdleConnections, nil
	}
	ms, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{FollowTools: cfg.LocalFollowTools})
	if err != nil {
		return agent.Options{}, nil, fmt.Errorf("serve: start the local model server: %w", err)
	}
	o.BaseURL = ms.URL
	if o.APIKey == "" {
		o.APIKey = "local" // it checks no key, but the client wants one
	}
	return o, func() {
		client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), handlerDrain)
		defer cancel()
		if err := ms.Close(ctx); err != nil {
			cfg.Logger.Warn("superstep: local model server did not stop cleanly", "err", err)
		}
	}, nil
}

// redactModelURL hides a password in a model server URL, for logs.
func redactModelURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
