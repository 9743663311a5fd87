package responses

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInputItemsPage_StableIDs(t *testing.T) {
	t.Parallel()
	req := []byte(`{"model":"m","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`)
	q := listQuery{limit: 20}
	a, err := inputItemsPage("resp_abc", req, nil, q)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := inputItemsPage("resp_abc", req, nil, q)
	if ids(a) != ids(b) {
		t.Fatal("ids differ between calls")
	}
	if want := "msg_abc_0000 msg_abc_0001 fco_abc_0002"; ids(a) != want {
		t.Errorf("ids %q, want %q", ids(a), want)
	}
	d := a.Data
	if d[1].Content[0].Type != "output_text" || d[0].Content[0].Type != "input_text" || *d[2].Output != "ok" || d[2].CallID != "c1" {
		t.Errorf("items = %+v", d)
	}
	one, _ := inputItemsPage("resp_x", []byte(`{"model":"m","input":"hello"}`), nil, q)
	if len(one.Data) != 1 || one.Data[0].Role != "user" || one.Data[0].Content[0].Text != "hello" || one.Data[0].ID != "msg_x_0000" {
		t.Errorf("string input items = %+v", one)
	}
	none, err := inputItemsPage("resp_x", []byte(`{"model":"m"}`), nil, q)
	if err != nil || len(none.Data) != 0 || none.Data == nil || none.FirstID != nil || none.HasMore {
		t.Errorf("no input: %+v, %v", none, err)
	}
}

// ids returns the item ids of a page separated by spaces.
func ids(l inputItemList) string {
	s := make([]string, len(l.Data))
	for i, it := range l.Data {
		s[i] = it.ID
	}
	return strings.Join(s, " ")
}

func TestInputItemsPage_Paging(t *testing.T) {
	t.Parallel()
	// Items 0..4, item 2 a function_call_output; ids end in their index.
	req := []byte(`{"model":"m","input":[{"role":"user","content":"0"},{"role":"user","content":"1"},
		{"type":"function_call_output","call_id":"c","output":"2"},{"role":"user","content":"3"},{"role":"user","content":"4"}]}`)
	id := func(i int) string {
		if i == 2 {
			return "fco_r_0002"
		}
		return fmt.Sprintf("msg_r_%04d", i)
	}
	short := func(l inputItemList) string {
		s := ""
		for _, it := range l.Data {
			s += it.ID[len(it.ID)-1:]
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
		{listQuery{limit: 2, desc: true, after: id(3)}, "21", true},
		{listQuery{limit: 2, desc: true, after: id(1)}, "0", false},
		{listQuery{limit: 2}, "01", true},
		{listQuery{limit: 2, after: id(3)}, "4", false},
		{listQuery{limit: 2, after: id(4)}, "", false},
		{listQuery{limit: 10, before: id(3)}, "012", false},
		{listQuery{limit: 1, after: id(0), before: id(3)}, "1", true},
		{listQuery{limit: 5, after: id(3), before: id(1)}, "", false},
		{listQuery{limit: 1, desc: true, after: id(2), before: id(0)}, "1", false},
	}
	for _, tt := range tests {
		got, err := inputItemsPage("resp_r", req, nil, tt.q)
		if err != nil {
			t.Fatalf("%+v: %v", tt.q, err)
		}
		if short(got) != tt.want || got.HasMore != tt.hasMore {
			t.Errorf("%+v: got %q has_more %v, want %q %v", tt.q, short(got), got.HasMore, tt.want, tt.hasMore)
		}
		for _, it := range got.Data {
			if i := int(it.ID[len(it.ID)-1] - '0'); it.ID != id(i) {
				t.Errorf("%+v: item id %q, want %q", tt.q, it.ID, id(i))
			}
		}
		if len(got.Data) > 0 && (*got.FirstID != got.Data[0].ID || *got.LastID != got.Data[len(got.Data)-1].ID) {
			t.Errorf("%+v: first/last ids wrong", tt.q)
		}
		if len(got.Data) == 0 && (got.FirstID != nil || got.LastID != nil || got.Data == nil) {
			t.Errorf("%+v: empty page %+v", tt.q, got)
		}
	}
	// A cursor must be the id of one of the items: the right prefix for
	// the item's type, this response's suffix, an index in range, written
	// as the server writes it.
	for _, bad := range []string{"nope", "msg_r_0002", "fco_r_0001", "msg_x_0001", "msg_r_0005", "msg_r_1", "msg_r_00001",
		"msg_r_-001", "msg_r_+001", "msg_r_", "msg_r_0001x"} {
		for _, q := range []listQuery{{limit: 1, after: bad}, {limit: 1, before: bad, desc: true}} {
			if _, err := inputItemsPage("resp_r", req, nil, q); toAPIError(err).Status != 400 {
				t.Errorf("cursor %+v: %v, want a 400", q, err)
			}
		}
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

// TestInputItemsPage_CostIsThePage (issue 12 #16): a page of input_items
// decodes the page's items, not the whole request: the allocations of a
// limit=1 call do not grow with the number of items (they were about 29
// per item, 5.8 million for 200,000 items).
func TestInputItemsPage_CostIsThePage(t *testing.T) {
	req := bigRequest(20_000)
	for _, q := range []listQuery{{limit: 1, desc: true}, {limit: 1}, {limit: 2, after: "msg_abc_10000"}} {
		allocs := testing.AllocsPerRun(3, func() {
			if page, err := inputItemsPage("resp_abc", req, nil, q); err != nil || len(page.Data) == 0 {
				t.Fatal(page, err)
			}
		})
		if allocs > 100 {
			t.Errorf("%+v: %.0f allocations for one page of a 20,000-item request", q, allocs)
		}
	}
}

// An item_reference is listed as the item it was resolved to (the
// response's recorded input), under this response's id for that item's
// type; cursors name it so, paging reads only the items it needs, and a
// reference with no recorded item is an error, never a guess.
func TestInputItemsPage_ItemReferenceListedResolved(t *testing.T) {
	t.Parallel()
	req := []byte(`{"model":"m","input":[{"role":"user","content":"a"},{"type":"item_reference","id":"mcp_old_0"},
		{"type":"item_reference","id":"msg_old_1"},{"type":"item_reference","id":"fc_old_2"},
		{"type":"function_call_output","call_id":"c1","output":"ok"}]}`)
	resolved := []byte(`[{"type":"message","role":"user","text":"a"},
		{"type":"mcp_call","call_id":"mcp_old_0","name":"calc","arguments":"{}","output":"42"},
		{"type":"message","role":"assistant","text":"it is 42"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"ok"}]`)
	page, err := inputItemsPage("resp_abc", req, resolved, listQuery{limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if want := "msg_abc_0000 mcp_abc_0001 msg_abc_0002 fc_abc_0003 fco_abc_0004"; ids(page) != want {
		t.Fatalf("ids %q, want %q", ids(page), want)
	}
	d := page.Data
	if d[1].Type != "mcp_call" || d[1].Name != "calc" || *d[1].Output != "42" || d[1].ServerLabel != "superstep" ||
		d[2].Role != "assistant" || d[2].Content[0].Type != "output_text" || d[2].Content[0].Text != "it is 42" ||
		d[3].Type != "function_call" || d[3].CallID != "c1" || d[3].Name != "f" {
		t.Fatalf("items %+v", d)
	}
	// A page after a cursor on a resolved item, newest first.
	q := listQuery{limit: 2, desc: true, after: "fc_abc_0003"}
	got, err := inputItemsPage("resp_abc", req, resolved, q)
	if err != nil || ids(got) != "msg_abc_0002 mcp_abc_0001" || !got.HasMore {
		t.Fatalf("page after fc_abc_0003: %q %v %v", ids(got), got.HasMore, err)
	}
	// The id of a reference's own type is not a cursor.
	q.after = "msg_abc_0003"
	if _, err := inputItemsPage("resp_abc", req, resolved, q); toAPIError(err).Status != 400 {
		t.Fatalf("cursor msg_abc_0003: %v", err)
	}
	for _, bad := range [][]byte{nil, []byte(`{}`), []byte(`[{"type":"message","role":"user","text":"a"}]`),
		[]byte(`[{"type":"message","role":"user","text":"a"},{"type":"item_reference","id":"mcp_old_0"}]`)} {
		if _, err := inputItemsPage("resp_abc", req, bad, listQuery{limit: 20}); err == nil {
			t.Errorf("recorded input %s: listed", bad)
		}
	}
}
