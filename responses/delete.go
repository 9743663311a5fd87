package responses

import "net/http"

// deletedBody is the reply of DELETE /v1/responses/{id}.
type deletedBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// handleDelete serves DELETE /v1/responses/{id}: the response and its
// event log are gone afterwards (a running one is cancelled first).
func (s *server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.host.Delete(r.Context(), id, ownerFrom(r.Context())); err != nil {
		s.writeError(w, r, mapNotFound(err, id))
		return
	}
	writeJSON(w, http.StatusOK, deletedBody{ID: id, Object: "response", Deleted: true})
}
