package invariants

import "testing"

func TestCheck(t *testing.T) {
	Check(true, "never fires")
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		Check(false, "fires only with -tags invariants")
		return false
	}()
	if panicked != Enabled {
		t.Fatalf("Check(false) panicked=%v with Enabled=%v", panicked, Enabled)
	}
}
