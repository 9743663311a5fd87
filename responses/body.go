package responses

import (
	"fmt"
	"io"
	"net/http"
)

// readBody reads the whole request body, at most maxBytes of it. A larger
// body fails with an *http.MaxBytesError (413 via writeError).
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		return nil, fmt.Errorf("responses: read body: %w", err)
	}
	return body, nil
}
