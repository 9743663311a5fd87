package responses

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// writeJSON writes v as the JSON body of a reply with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types reach here; they always marshal.
		b = []byte(`{"error":{"message":"encoding failed","type":"server_error","param":null,"code":null}}`)
		status = http.StatusInternalServerError
	}
	writeRawJSON(w, status, b)
}

// writeRawJSON writes already-encoded JSON (a stored Response snapshot)
// without re-encoding it.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}
