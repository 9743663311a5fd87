package protocol

import (
	"errors"
	"testing"
)

// Tools the API would refuse are a 400 naming the field; valid function
// and hosted tools pass.
func TestParseCreate_Tools(t *testing.T) {
	ok := []string{
		`{"model":"m"}`,
		`{"model":"m","tools":null}`,
		`{"model":"m","tools":[]}`,
		`{"model":"m","tools":[{"type":"function","name":"f"}]}`,
		`{"model":"m","tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false,"description":"d"}]}`,
		`{"model":"m","tools":[{"type":"function","name":"f","parameters":null,"strict":null,"description":null}]}`,
		`{"model":"m","tools":[{"type":"web_search"}]}`,
	}
	for _, body := range ok {
		if _, err := ParseCreate([]byte(body), 0); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	bad := []struct{ body, param, code string }{
		{`{"model":"m","tools":{}}`, "tools", CodeInvalidType},
		{`{"model":"m","tools":["f"]}`, "tools[0]", CodeInvalidType},
		{`{"model":"m","tools":[{"name":"f"}]}`, "tools[0].type", CodeMissingParam},
		{`{"model":"m","tools":[{"type":7}]}`, "tools[0].type", CodeInvalidType},
		{`{"model":"m","tools":[{"type":"function"}]}`, "tools[0].name", CodeMissingParam},
		{`{"model":"m","tools":[{"type":"function","name":"f","parameters":"{}"}]}`, "tools[0].parameters", CodeInvalidType},
		{`{"model":"m","tools":[{"type":"function","name":"f","parameters":[]}]}`, "tools[0].parameters", CodeInvalidType},
		{`{"model":"m","tools":[{"type":"function","name":"f","strict":"yes"}]}`, "tools[0].strict", CodeInvalidType},
		{`{"model":"m","tools":[{"type":"function","name":"f","description":1}]}`, "tools[0].description", CodeInvalidType},
		{`{"model":"m","tools":[{"type":"function","name":"f","Name":"g"}]}`, "tools[0].Name", CodeUnknownParam},
	}
	for _, tt := range bad {
		_, err := ParseCreate([]byte(tt.body), 0)
		var re *RequestError
		if !errors.As(err, &re) || re.Param != tt.param || re.Code != tt.code {
			t.Errorf("%s: %v, want param %s code %s", tt.body, err, tt.param, tt.code)
		}
	}
}
