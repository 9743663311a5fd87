package responses

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
)

type ownerKey struct{}

// ownerFrom returns the owner identity authenticate put in ctx.
func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// authOn reports whether requests must carry an API key.
func (s *server) authOn() bool { return len(s.opts.APIKeys) > 0 }

// authenticate checks the bearer key when API keys are configured and puts
// the key's owner in the request context. A response is visible only to its
// owner: the host answers another owner's id with not found.
func (s *server) authenticate(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authOn() {
			next(w, r)
			return
		}
		owner, ok := s.lookupKey(bearerToken(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="superstep"`)
			s.writeError(w, r, &apiError{Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
				Message: "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>'."})
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)))
	}
}

// lookupKey compares key with every configured key in constant time, so
// the reply time does not tell how much of a guess was right.
func (s *server) lookupKey(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	owner, found := "", false
	for k, o := range s.opts.APIKeys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			owner, found = o, true
		}
	}
	return owner, found
}

func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
