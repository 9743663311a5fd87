package protocol

// HostList is the body of GET /v1/hosts: the live hosts sharing the
// store, in the shape of the API's other lists.
type HostList struct {
	Object string `json:"object"` // "list"
	Data   []Host `json:"data"`
}

// Host is one entry of HostList.
type Host struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // as others reach it (serve --advertise-addr)
	// Runs are the responses whose runs the host drives ([] when none).
	Runs []string `json:"runs"`
	// LeaseExpiresAt is the Unix time its latest lease or registry entry
	// expires.
	LeaseExpiresAt int64 `json:"lease_expires_at"`
}
