package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/superstep/superstep/protocol"
)

// runHosts implements `superstep hosts`: it asks a running server for
// GET /v1/hosts and prints the live hosts as a table.
func runHosts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hosts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("SUPERSTEP_ADDR", "127.0.0.1:8080"), "address of a running server")
	key := fs.String("api-key", os.Getenv("SUPERSTEP_API_KEY"), "bearer key when the server has keys: one of its --admin-keys (env SUPERSTEP_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return withCode(exitUsage, err)
	}
	reply, err := fetchHosts(ctx, *addr, *key)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tADDR\tRUNS\tLEASE EXPIRES\tRESPONSES")
	for _, h := range reply.Data {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", h.ID, h.Addr, len(h.Runs),
			time.Unix(h.LeaseExpiresAt, 0).UTC().Format(time.RFC3339), strings.Join(h.Runs, ","))
	}
	return tw.Flush()
}

// fetchHosts reads GET /v1/hosts from the server at addr.
func fetchHosts(ctx context.Context, addr, key string) (*protocol.HostList, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/hosts", nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	// One request and exit: no idle connection to keep around.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status + ": " + strings.TrimSpace(string(body)))
	}
	var out protocol.HostList
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", resp.Request.URL, err)
	}
	return &out, nil
}
