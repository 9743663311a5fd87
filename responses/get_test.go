package responses

import (
	"net/http/httptest"
	"testing"
)

func TestParseGetQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query, body string
		stream            bool
		after             int64
	}{
		{"Plain", "", "", false, -1},
		{"QueryStream", "stream=true&starting_after=3", "", true, 3},
		{"GoSDKBody", "include_obfuscation=false&starting_after=3", `{"stream":true}`, true, 3},
		{"BodyFalse", "", `{"stream":false}`, false, -1},
		{"QueryWinsTrue", "stream=true", `{"stream":false}`, true, -1},
		{"IncludeBrackets", "include[]=reasoning.encrypted_content&include=x&stream=1", "", true, -1},
		{"BodyStartingAfter", "", `{"stream":true,"starting_after":7}`, true, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/v1/responses/r?"+tt.query, nil)
			q, err := parseGetQuery(r, []byte(tt.body))
			if err != nil || q.stream != tt.stream || q.startingAfter != tt.after {
				t.Errorf("got %+v, %v; want stream %v after %d", q, err, tt.stream, tt.after)
			}
		})
	}
	for _, bad := range []struct{ query, body string }{
		{"stream=maybe", ""}, {"starting_after=x", ""}, {"starting_after=-5", ""}, {"", `{"stream":"yes"}`}, {"", `{bad`},
	} {
		r := httptest.NewRequest("GET", "/v1/responses/r?"+bad.query, nil)
		if _, err := parseGetQuery(r, []byte(bad.body)); toAPIError(err).Status != 400 {
			t.Errorf("%q %q accepted", bad.query, bad.body)
		}
	}
}
