package host

import "time"

// now reads the host's clock (Config.Test.Now in tests).
func (h *Host) now() time.Time {
	if h.cfg.Test.Now != nil {
		return h.cfg.Test.Now()
	}
	return time.Now()
}
