package examples

// The wiring of the examples into a host: the only file of the package
// that imports it (the workflows themselves know nothing of the host).

import (
	"fmt"

	"github.com/superstep/superstep/host"
)

// Register hosts every demo workflow natively on h under its model name.
func Register(h *host.Host) error {
	wfs, err := Workflows(nil)
	if err != nil {
		return err
	}
	for _, name := range Names() {
		if err := h.RegisterWorkflow(name, wfs[name]); err != nil {
			return fmt.Errorf("examples: %w", err)
		}
	}
	return nil
}

// RegisterLLM hosts the LLM demos on h under their model names, with live
// publication by default (their tokens reach clients as they come;
// metadata.publication=committed overrides it per request).
func RegisterLLM(h *host.Host, o *LLMOptions) error {
	wfs, err := LLMWorkflows(o)
	if err != nil {
		return err
	}
	for _, name := range LLMNames() {
		if err := h.RegisterWorkflow(name, wfs[name], host.WithPublication(host.PublicationLive)); err != nil {
			return fmt.Errorf("examples: %w", err)
		}
	}
	return registerOrchestra(h, o)
}

// RegisterProxies hosts the model ids of o's model server on h, each under
// its own id (see ProxyAgent), with live publication by default (tokens
// reach clients as they come; metadata.publication=committed overrides it
// per request). An id already registered (a demo's) is an error.
func RegisterProxies(h *host.Host, o *LLMOptions, ids []string) error {
	for _, id := range ids {
		a, err := ProxyAgent(o, id)
		if err != nil {
			return err
		}
		if err := h.RegisterAgent(id, a, host.WithPublication(host.PublicationLive)); err != nil {
			return fmt.Errorf("examples: proxy: %w", err)
		}
	}
	return nil
}

// registerOrchestra hosts demo.orchestra on h with live publication, like
// the other LLM demos.
func registerOrchestra(h *host.Host, o *LLMOptions) error {
	wf, err := OrchestraWorkflow(o)
	if err != nil {
		return fmt.Errorf("examples: %s: %w", Orchestra, err)
	}
	if err := h.RegisterWorkflow(Orchestra, wf, host.WithPublication(host.PublicationLive)); err != nil {
		return fmt.Errorf("examples: %w", err)
	}
	return nil
}
