package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Scrape reads a Prometheus text exposition from base+"/metrics" and
// returns each sample by its name with labels as written
// (`name{op="commit"}`), so a test can compare a server's counters before
// and after an event.
func Scrape(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("proctest: scrape: %w", err)
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("proctest: scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("proctest: scrape %s: %s", base, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics parses the Prometheus text format: one "name value" or
// "name{labels} value" line per sample, comments skipped; a timestamp
// after the value is ignored.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the last space outside the labels; label
		// values may hold spaces, so split after the closing brace.
		name, rest := line, ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			name, rest = line[:i+1], line[i+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("proctest: metrics line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("proctest: metrics line %q: %w", line, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("proctest: metrics: %w", err)
	}
	return out, nil
}
