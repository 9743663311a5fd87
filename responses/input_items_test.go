package responses

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestStoredInputItems_StableIDs(t *testing.T) {
	t.Parallel()
	req := []byte(`{"model":"m","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`)
	a, err := storedInputItems("resp_abc", req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := storedInputItems("resp_abc", req)
	if !slices.EqualFunc(a, b, func(x, y inputItem) bool { return x.ID == y.ID }) {
		t.Fatal("ids differ between calls")
	}
	want := []string{"msg_abc_0000", "msg_abc_0001", "fco_abc_0002"}
	for i, it := range a {
		if it.ID != want[i] {
			t.Errorf("item %d id %q, want %q", i, it.ID, want[i])
		}
	}
	if a[1].Content[0].Type != "output_text" || a[0].Content[0].Type != "input_text" || *a[2].Output != "ok" || a[2].CallID != "c1" {
		t.Errorf("items = %+v", a)
	}
	one, _ := storedInputItems("resp_x", []byte(`{"model":"m","input":"hello"}`))
	if len(one) != 1 || one[0].Role != "user" || one[0].Content[0].Text != "hello" {
		t.Errorf("string input items = %+v", one)
	}
}

func TestPageItems(t *testing.T) {
	t.Parallel()
	var items []inputItem
	for i := range 5 {
		items = append(items, inputItem{ID: fmt.Sprint(i)})
	}
	ids := func(l inputItemList) string {
		s := ""
		for _, it := range l.Data {
			s += it.ID
		}
		return s
	}
	tests := []struct {
		q       listQuery
		want    string
		hasMore bool
	}{
		{listQuery{limit: 20, desc: true}, "43210", false},
		{listQuery{limit: 2, desc: true}, "43", true},
		{listQuery{limit: 2, desc: true, after: "3"}, "21", true},
		{listQuery{limit: 2, desc: true, after: "1"}, "0", false},
		{listQuery{limit: 2}, "01", true},
		{listQuery{limit: 2, after: "3"}, "4", false},
		{listQuery{limit: 2, after: "4"}, "", false},
		{listQuery{limit: 10, before: "3"}, "012", false},
		{listQuery{limit: 1, after: "0", before: "3"}, "1", true},
	}
	for _, tt := range tests {
		got, err := pageItems(items, tt.q)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != tt.want || got.HasMore != tt.hasMore {
			t.Errorf("%+v: got %q has_more %v, want %q %v", tt.q, ids(got), got.HasMore, tt.want, tt.hasMore)
		}
		if len(got.Data) > 0 && (*got.FirstID != got.Data[0].ID || *got.LastID != got.Data[len(got.Data)-1].ID) {
			t.Errorf("%+v: first/last ids wrong", tt.q)
		}
		if len(got.Data) == 0 && (got.FirstID != nil || got.LastID != nil) {
			t.Errorf("%+v: empty page has ids", tt.q)
		}
	}
	if _, err := pageItems(items, listQuery{limit: 1, after: "nope"}); toAPIError(err).Status != 400 {
		t.Errorf("unknown cursor: %v", err)
	}
}

func TestParseListQuery(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "order=up"} {
		if _, err := parseListQuery(httptest.NewRequest("GET", "/x?"+bad, nil)); toAPIError(err).Status != 400 {
			t.Errorf("%s accepted", bad)
		}
	}
	q, err := parseListQuery(httptest.NewRequest("GET", "/x?limit=100&order=asc&after=a", nil))
	if err != nil || q.limit != 100 || q.desc || q.after != "a" {
		t.Errorf("q = %+v, %v", q, err)
	}
	q, _ = parseListQuery(httptest.NewRequest("GET", "/x", nil))
	if q.limit != 20 || !q.desc {
		t.Errorf("defaults = %+v, want limit 20 desc", q)
	}
}
