package responses

import (
	"fmt"
	"net/http"

	"github.com/superstep/superstep/host"
)

// modelObject is one entry of GET /v1/models, in OpenAI's format plus the
// kind of what is hosted.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Kind    string `json:"kind"` // "workflow" or "agent"
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func toModelObject(m host.Model) modelObject {
	return modelObject{ID: m.ID, Object: "model", Created: m.CreatedAt.Unix(), OwnedBy: "superstep", Kind: m.Kind}
}

// handleModels serves GET /v1/models: the hosted workflows and agents.
func (s *server) handleModels(w http.ResponseWriter, _ *http.Request) {
	models := s.host.Models()
	list := modelList{Object: "list", Data: make([]modelObject, 0, len(models))}
	for _, m := range models {
		list.Data = append(list.Data, toModelObject(m))
	}
	writeJSON(w, http.StatusOK, list)
}

// handleModel serves GET /v1/models/{model}.
func (s *server) handleModel(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	for _, m := range s.host.Models() {
		if m.ID == name {
			writeJSON(w, http.StatusOK, toModelObject(m))
			return
		}
	}
	s.writeError(w, r, &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model '%s' does not exist.", truncate(name, 200))})
}
