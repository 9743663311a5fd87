package responses

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
)

type (
	ownerKey struct{}
	adminKey struct{}
)

// ownerFrom returns the owner identity authenticate put in ctx.
func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// isAdmin reports whether the request's key is an admin key.
func isAdmin(ctx context.Context) bool {
	a, _ := ctx.Value(adminKey{}).(bool)
	return a
}

// authOn reports whether requests must carry an API key.
func (s *server) authOn() bool { return len(s.opts.APIKeys)+len(s.opts.AdminKeys) > 0 }

// authenticate checks the bearer key when API keys are configured and puts
// the key's owner in the request context. A response is visible only to its
// owner: the host answers another owner's id with not found.
func (s *server) authenticate(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authOn() {
			next(w, r)
			return
		}
		owner, admin, ok := s.lookupKey(bearerToken(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="superstep"`)
			s.writeError(w, r, &apiError{Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
				Message: "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>'."})
			return
		}
		ctx := context.WithValue(r.Context(), ownerKey{}, owner)
		if admin {
			ctx = context.WithValue(ctx, adminKey{}, true)
		}
		next(w, r.WithContext(ctx))
	}
}

// lookupKey compares key with every configured key (API and admin) in
// constant time, so the reply time does not tell how much of a guess was
// right. It returns the key's owner and whether it is an admin key.
func (s *server) lookupKey(key string) (owner string, admin, found bool) {
	if key == "" {
		return "", false, false
	}
	for k, o := range s.opts.APIKeys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			owner, found = o, true
		}
	}
	for k, o := range s.opts.AdminKeys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			owner, admin, found = o, true, true
		}
	}
	return owner, admin, found
}

func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
