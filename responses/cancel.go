package responses

import "net/http"

// handleCancel serves POST /v1/responses/{id}/cancel. It is idempotent:
// the reply shows status cancelled, or the terminal status the response
// had already reached, and the cancel is durable before the reply.
func (s *server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	resp, err := s.host.Cancel(r.Context(), id, ownerFrom(r.Context()))
	if err != nil {
		s.writeError(w, r, mapNotFound(err, id))
		return
	}
	writeRawJSON(w, http.StatusOK, resp.Snapshot)
}
