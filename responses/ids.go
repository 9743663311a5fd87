package responses

import "net/http"

// maxIDLen bounds a response id: the host's ids are "resp_" and 32 hex
// digits; the room above that is for ids of other versions or tools.
const maxIDLen = 128

// validResponseID reports whether id can name a response: "resp_" then
// letters, digits, '_' or '-' (the host's ids are "resp_" + hex, see
// host.newID). Anything else — NUL, invalid UTF-8, spaces, slashes — can
// name no response, and must not reach the store: PostgreSQL refuses such
// text with an error (a 500), where SQLite finds nothing.
func validResponseID(id string) bool {
	const prefix = "resp_"
	if len(id) <= len(prefix) || len(id) > maxIDLen || id[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// withResponseID answers a route's {id} that cannot name a response with
// the same 404 an unknown id gets, before anything reads the store.
func (s *server) withResponseID(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); !validResponseID(id) {
			s.writeError(w, r, responseNotFound(truncate(id, 200)))
			return
		}
		next(w, r)
	}
}
