package responses

import "net/http"

// hostObject is one entry of GET /v1/hosts.
type hostObject struct {
	ID             string   `json:"id"`
	Addr           string   `json:"addr"`
	Runs           []string `json:"runs"`
	LeaseExpiresAt int64    `json:"lease_expires_at"`
}

type hostList struct {
	Object string       `json:"object"`
	Data   []hostObject `json:"data"`
}

// handleHosts serves GET /v1/hosts: the live hosts sharing the store (those
// in its host registry, and any other holding a lease) and the runs each
// drives.
func (s *server) handleHosts(w http.ResponseWriter, r *http.Request) {
	hosts, err := s.host.Hosts(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list := hostList{Object: "list", Data: make([]hostObject, 0, len(hosts))}
	for _, h := range hosts {
		runs := h.Runs
		if runs == nil {
			runs = []string{}
		}
		list.Data = append(list.Data, hostObject{ID: h.ID, Addr: h.Addr, Runs: runs, LeaseExpiresAt: h.LeaseExpiresAt.Unix()})
	}
	writeJSON(w, http.StatusOK, list)
}
