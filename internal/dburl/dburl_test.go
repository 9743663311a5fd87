package dburl

import "testing"

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?x=1", "postgres://u:xxxxx@h:5432/db?x=1"},
		{"postgresql://u:p@h/db", "postgresql://u:xxxxx@h/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db", "postgres://h/db"},
		{"./a:b@c.db", "./a:b@c.db"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if IsPostgres("superstep.db") || !IsPostgres("postgresql://h/db") {
		t.Error("IsPostgres misreads a path or a URL")
	}
}
