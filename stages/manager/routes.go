package manager

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// table lists every route of the API: Asperathos' routes (reference §3.2)
// and Pace's additions (report summary, OpenAPI).
func (a *API) table() []route {
	m := a.m
	return []route{
		{method: "POST", path: "/submissions", summary: "Submit a job (Pace spec as JSON or YAML, or Asperathos kubejobs JSON)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				data, ct, err := a.readBody(r, true)
				if err != nil {
					return nil, err
				}
				rec, err := m.submit(r.Context(), u, data, ct, a.compat)
				if err != nil {
					return nil, err
				}
				out := map[string]any{"job_id": rec.ID}
				if rec.Prediction != nil && !a.compat { // Asperathos answered the id alone
					out["prediction"] = rec.Prediction
				}
				return out, nil
			}},
		{method: "GET", path: "/submissions", summary: "List the caller's jobs, keyed by id", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				jobs, err := m.Jobs(r.Context(), u)
				if err != nil {
					return nil, err
				}
				out := make(map[string]any, len(jobs))
				for _, rec := range jobs {
					out[rec.ID] = m.view(r.Context(), rec, a.compat) // Asperathos listed the report fields too
				}
				return out, nil
			}},
		{method: "DELETE", path: "/submissions", summary: "Delete every finished job of the caller (409 lists the running ones kept)", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				_, kept, err := m.DeleteFinished(r.Context(), u)
				if err == nil && len(kept) > 0 {
					err = apiError(http.StatusConflict, "finished jobs deleted; still running, not deleted: %s", strings.Join(kept, ", "))
				}
				return nil, err
			}},
		{method: "GET", path: "/submissions/{id}", summary: "Show a job (Asperathos view plus Pace's fields)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := a.job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				return m.view(r.Context(), rec, true), nil
			}},
		{method: "PUT", path: "/submissions/{id}/stop", summary: "Stop a job: no new items, items in flight finish", ok: http.StatusNoContent, body: true,
			handle: a.command(m.Stop)},
		{method: "PUT", path: "/submissions/{id}/terminate", summary: "Terminate a job at once and delete its workers", ok: http.StatusNoContent, body: true,
			handle: a.command(m.Terminate)},
		{method: "DELETE", path: "/submissions/{id}", summary: "Delete a finished job and its data (409 while it runs)", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, err := a.bodyUser(r, u)
				if err != nil {
					return nil, err
				}
				return nil, m.Delete(r.Context(), u, jobID(r))
			}},
		{method: "GET", path: "/submissions/{id}/report", summary: "Detailed report: samples keyed by time", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				d, _, err := a.report(r, u)
				return d, err
			}},
		{method: "GET", path: "/submissions/{id}/report/summary", summary: "Summary report (Asperathos' fields plus Pace's)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				_, s, err := a.report(r, u)
				return s, err
			}},
		{method: "GET", path: "/submissions/{id}/errors", summary: "Dead-lettered items of a job", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := a.job(r.Context(), u, jobID(r))
				if a.compat && err != nil && asAPIError(err).Code == http.StatusNotFound {
					return map[string]any{}, nil
				}
				if err != nil {
					return nil, err
				}
				dead, err := m.bus.Letters().Stored(r.Context(), rec.ID)
				if a.compat {
					return asperathosErrors(dead), err
				}
				if dead == nil {
					dead = []*schemas.DeadLetter{}
				}
				return dead, err
			}},
		{method: "GET", path: "/submissions/{id}/log", summary: "Log lines of a job; ?follow=true streams NDJSON until the job ends", ok: http.StatusOK, stream: true,
			handle: a.logs},
		{method: "GET", path: "/submissions/{id}/visualizer", summary: "URL of the job's dashboard", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) {
				rec, err := a.job(r.Context(), u, jobID(r))
				if err != nil {
					return nil, err
				}
				return map[string]string{"visualizer_url": m.visualizerURL(rec)}, nil
			}},
		{method: "POST", path: "/submissions/cluster", summary: "Register a cluster's kubeconfig (admins)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req struct {
					Name   string `json:"cluster_name"`
					Config string `json:"cluster_config"`
					credentials
				}
				u, err := a.decode(r, u, &req)
				if err != nil {
					return nil, err
				}
				if req.Config == "" {
					return nil, invalidAs("request", field.ErrorList{field.Required(field.NewPath("cluster_config"), "a kubeconfig")})
				}
				_, err = m.updateCluster(r.Context(), u, req.Name, true, func(c *schemas.Cluster) error { c.Config = req.Config; return nil })
				return map[string]string{"cluster_name": req.Name, "status": "success"}, err
			}},
		{method: "GET", path: "/submissions/cluster", summary: "List registered clusters (admins)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) { return a.clusters(r, u, false) }},
		{method: "GET", path: "/submissions/cluster/activate", summary: "Show the active cluster (admins)", ok: http.StatusOK,
			handle: func(r *http.Request, u auth.User) (any, error) { return a.clusters(r, u, true) }},
		{method: "PUT", path: "/submissions/cluster/{name}/activate", summary: "Make a cluster the active one (admins)", ok: http.StatusOK, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, name, err := a.clusterCall(r, u)
				if err != nil {
					return nil, err
				}
				status := "active"
				if a.compat {
					status = "success"
				}
				return map[string]string{"cluster_name": name, "status": status}, m.activateCluster(r.Context(), u, name)
			}},
		{method: "DELETE", path: "/submissions/cluster/{name}", summary: "Delete a cluster (admins)", ok: http.StatusNoContent, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, name, err := a.clusterCall(r, u)
				if err != nil {
					return nil, err
				}
				return nil, m.deleteCluster(r.Context(), u, name)
			}},
		{method: "POST", path: "/submissions/cluster/{name}/certificate", summary: "Add a certificate to a cluster (admins)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req struct {
					Name    string `json:"certificate_name"`
					Content string `json:"certificate_content"`
					credentials
				}
				u, err := a.decode(r, u, &req)
				if err != nil {
					return nil, err
				}
				if req.Name == "" {
					return nil, invalidAs("request", field.ErrorList{field.Required(field.NewPath("certificate_name"), "")})
				}
				name, err := pathToken(r, "name")
				if err != nil {
					return nil, err
				}
				_, err = m.updateCluster(r.Context(), u, name, false, func(c *schemas.Cluster) error {
					if c.Certificates == nil {
						c.Certificates = map[string]string{}
					}
					c.Certificates[req.Name] = req.Content
					return nil
				})
				return map[string]string{"cluster_name": name, "certificate_name": req.Name, "status": "success"}, err
			}},
		{method: "DELETE", path: "/submissions/cluster/{name}/certificate/{cert}", summary: "Remove a certificate from a cluster (admins)", ok: http.StatusAccepted, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				u, name, err := a.clusterCall(r, u)
				if err != nil {
					return nil, err
				}
				cert := r.PathValue("cert")
				_, err = m.updateCluster(r.Context(), u, name, false, func(c *schemas.Cluster) error {
					if _, ok := c.Certificates[cert]; !ok {
						return apiError(http.StatusNotFound, "cluster %q has no certificate %q", name, cert)
					}
					delete(c.Certificates, cert)
					return nil
				})
				return map[string]string{"cluster_name": name, "certificate_name": cert, "status": "success"}, err
			}},
		{method: "GET", path: "/plugins", summary: "List built-in plugins and registered external controllers", ok: http.StatusOK,
			handle: func(r *http.Request, _ auth.User) (any, error) {
				ps, err := m.Plugins(r.Context())
				if a.compat {
					return asperathosPlugins(ps), err
				}
				return ps, err
			}},
		{method: "POST", path: "/plugins", summary: "Register an external controller by name (admins; no code is installed)", ok: http.StatusOK, body: true,
			handle: func(r *http.Request, u auth.User) (any, error) {
				var req pluginRequest
				u, err := a.decode(r, u, &req)
				if err == nil {
					_, err = m.RegisterPlugin(r.Context(), u, req)
				}
				switch {
				case err != nil && a.compat && asAPIError(err).Code == http.StatusBadRequest:
					return nil, installError{asAPIError(err)} // Asperathos' answer, and why
				case err != nil:
					return nil, err
				}
				return map[string]string{"message": "Plugin registered successfully"}, nil
			}},
	}
}
