package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// apiClient talks to a running server for the inspection commands.
type apiClient struct {
	base string // http://host:port, no trailing slash
	key  string
	http *http.Client
}

// clientFlags are the flags every inspection command takes.
type clientFlags struct {
	addr, key string
	json      bool
}

// register adds --addr, --api-key and --json to fs.
func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", envOr("SUPERSTEP_ADDR", "127.0.0.1:8080"), "address of a running server (env SUPERSTEP_ADDR)")
	fs.StringVar(&c.key, "api-key", os.Getenv("SUPERSTEP_API_KEY"), "bearer key when the server has keys (env SUPERSTEP_API_KEY)")
	fs.BoolVar(&c.json, "json", false, "print the server's JSON instead of a table")
}

func (c *clientFlags) client() *apiClient {
	base := c.addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	// No idle connection is kept: a command makes a few requests and exits.
	return &apiClient{base: strings.TrimSuffix(base, "/"), key: c.key,
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

// apiError is an error reply of the server.
type apiError struct {
	Status  int
	Message string
	Code    string
}

func (e *apiError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("%d: %s", e.Status, e.Message)
}

// open sends a request and returns the reply, an *apiError for a non-2xx
// one.
func (c *apiClient) open(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb struct {
			Error struct {
				Message string  `json:"message"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		ae := &apiError{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
		if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
			ae.Message = eb.Error.Message
			if eb.Error.Code != nil {
				ae.Code = *eb.Error.Code
			}
		}
		return nil, ae
	}
	return resp, nil
}

// call sends a request and returns the reply's body, decoded into out
// when out is not nil.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) ([]byte, error) {
	resp, err := c.open(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return b, nil
}

// writeJSONBody prints a reply's JSON indented.
func writeJSONBody(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		_, err = w.Write(b)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// commandError wraps err as a command's failure: a usage error keeps its
// exit code, a server's 4xx is the caller's (usage), anything else is 1.
func commandError(cmd string, err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) && ae.Status/100 == 4 {
		return withCode(exitUsage, fmt.Errorf("%s: %w", cmd, err))
	}
	return fmt.Errorf("%s: %w", cmd, err)
}
