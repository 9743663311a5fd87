package responses

import (
	"net/http"

	"github.com/superstep/superstep/protocol"
)

// handleHosts serves GET /v1/hosts: the live hosts sharing the store (those
// in its host registry, and any other holding a lease) and the runs each
// drives. It shows every owner's response ids and the hosts' addresses,
// so with authentication on it needs an admin key (Options.AdminKeys);
// other keys get 403.
func (s *server) handleHosts(w http.ResponseWriter, r *http.Request) {
	if s.authOn() && !isAdmin(r.Context()) {
		s.writeError(w, r, &apiError{Status: http.StatusForbidden, Type: typeInvalidRequest, Code: "permission_denied",
			Message: "Listing the hosts shows every API key's responses: it needs an admin key (superstep serve --admin-keys)."})
		return
	}
	hosts, err := s.host.Hosts(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list := protocol.HostList{Object: "list", Data: make([]protocol.Host, 0, len(hosts))}
	for _, h := range hosts {
		runs := h.Runs
		if runs == nil {
			runs = []string{}
		}
		list.Data = append(list.Data, protocol.Host{ID: h.ID, Addr: h.Addr, Runs: runs, LeaseExpiresAt: h.LeaseExpiresAt.Unix()})
	}
	writeJSON(w, http.StatusOK, list)
}
