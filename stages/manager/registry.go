package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// Built-in plugins, by kind; the controllers are the names schemas lists,
// which the controller stage's registry holds exactly (its test), so the two
// cannot drift. External controllers are
// registered at run time (POST /plugins): any program that reads
// pace.metrics.<job>.progress and publishes pace.decisions.<job> for the
// jobs whose spec names it.
var builtinPlugins = map[string][]string{
	"controller": schemas.BuiltinControllers(),
	"actuator":   {schemas.LocalActuator, schemas.KubernetesActuator},
	"sink":       {"influxdb"},
}

// Plugin is one entry of GET /plugins.
type Plugin struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	Source    string `json:"source"` // "builtin" or "external"
	// PluginSource is where an external plugin comes from, as registered.
	PluginSource string `json:"plugin_source,omitempty"`
	// Description says what an external plugin does (from its registration).
	Description string `json:"description,omitempty"`
}

func (m *Stage) bucket(ctx context.Context, name schemas.Bucket, desc string) (jetstream.KeyValue, error) {
	js := m.bus.JetStream()
	bucket := m.bus.Prefix().Bucket(name)
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) { // replicated as the rest of the bus
		var replicas int
		if replicas, err = m.bus.Replicas(ctx); err == nil {
			kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: desc,
				Storage: jetstream.FileStorage, Replicas: replicas})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	return kv, nil
}

func (m *Stage) pluginsKV(ctx context.Context) (jetstream.KeyValue, error) {
	return m.bucket(ctx, schemas.BucketPlugins, "registered external controllers")
}

func (m *Stage) clustersKV(ctx context.Context) (jetstream.KeyValue, error) {
	return m.bucket(ctx, schemas.BucketClusters, "registered Kubernetes clusters (kubeconfigs)")
}

// Plugins lists the built-in and registered plugins.
func (m *Stage) Plugins(ctx context.Context) ([]Plugin, error) {
	var out []Plugin
	for _, kind := range []string{"controller", "actuator", "sink"} {
		for _, name := range builtinPlugins[kind] {
			out = append(out, Plugin{Name: name, Component: kind, Source: "builtin"})
		}
	}
	kv, err := m.pluginsKV(ctx)
	if err != nil {
		return nil, err
	}
	ext, err := readAll[Plugin](ctx, kv)
	if err != nil {
		return nil, err
	}
	return append(out, ext...), nil
}

// pluginRequest is the body of POST /plugins (Asperathos' fields; Pace
// installs no code, so only plugin_name and component matter).
type pluginRequest struct {
	PluginName    string `json:"plugin_name"`
	Component     string `json:"component"`
	PluginSource  string `json:"plugin_source"`
	InstallSource string `json:"install_source"`
	PluginModule  string `json:"plugin_module"`
	Description   string `json:"description"`
	EnableAuth    bool   `json:"enable_auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
}

// RegisterPlugin registers an external controller by name. Admins only.
func (m *Stage) RegisterPlugin(ctx context.Context, u auth.User, r pluginRequest) (*Plugin, error) {
	if err := m.requireAdmin(u); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	if !schemas.ValidToken(r.PluginName) {
		errs = append(errs, field.Invalid(field.NewPath("plugin_name"), r.PluginName, "must be 1-128 letters, digits, '-' or '_'"))
	}
	if r.Component != "controller" {
		errs = append(errs, field.NotSupported(field.NewPath("component"), r.Component, []string{"controller"}))
	}
	if slices.Contains(builtinPlugins["controller"], r.PluginName) {
		errs = append(errs, field.Duplicate(field.NewPath("plugin_name"), r.PluginName))
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	kv, err := m.pluginsKV(ctx)
	if err != nil {
		return nil, err
	}
	p := Plugin{Name: r.PluginName, Component: r.Component, Source: "external", PluginSource: r.PluginSource, Description: r.Description}
	data, _ := json.Marshal(p)
	if _, err := kv.Put(ctx, p.Name, data); err != nil {
		return nil, fmt.Errorf("register plugin %s: %w", p.Name, err)
	}
	m.log.Info("external controller registered", "plugin", p.Name, "by", u.Name)
	return &p, nil
}

// checkPlugins reports a controller or cluster the spec names that does not exist.
func (m *Stage) checkPlugins(ctx context.Context, s *schemas.JobSpec) (errs field.ErrorList) {
	if name := s.Controller.Name; name != "" && !slices.Contains(builtinPlugins["controller"], name) {
		known := slices.Clone(builtinPlugins["controller"])
		kv, err := m.pluginsKV(ctx)
		if err == nil {
			if _, err = kv.Get(ctx, name); err == nil {
				return nil
			}
			ext, _ := readAll[Plugin](ctx, kv)
			for _, p := range ext {
				known = append(known, p.Name)
			}
		}
		errs = append(errs, field.NotSupported(field.NewPath("spec", "controller", "name"), name, known))
	}
	if name := s.Actuator.Cluster; name != "" {
		if _, _, err := m.cluster(ctx, name); err != nil {
			errs = append(errs, field.NotFound(field.NewPath("spec", "actuator", "cluster"), name))
		}
	}
	return errs
}

func (m *Stage) requireAdmin(u auth.User) error {
	if m.callerOf(u).admin {
		return nil
	}
	if u.IsAnonymous() {
		return apiError(http.StatusUnauthorized, "this route needs credentials")
	}
	return apiError(http.StatusForbidden, "only members of %s or %s may do this", auth.Admins, auth.Masters)
}

func (m *Stage) cluster(ctx context.Context, name string) (*schemas.Cluster, uint64, error) {
	kv, err := m.clustersKV(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, apiError(http.StatusNotFound, "cluster %q not found", name)
	}
	if err != nil {
		return nil, 0, err
	}
	var c schemas.Cluster
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, 0, fmt.Errorf("decode cluster %s: %w", name, err)
	}
	return &c, e.Revision(), nil
}

// Clusters returns the registered clusters. Admins only.
func (m *Stage) Clusters(ctx context.Context, u auth.User) ([]schemas.Cluster, error) {
	if err := m.requireAdmin(u); err != nil {
		return nil, err
	}
	kv, err := m.clustersKV(ctx)
	if err != nil {
		return nil, err
	}
	return readAll[schemas.Cluster](ctx, kv)
}

// updateCluster applies fn to a cluster with compare-and-set; create makes
// a new one.
func (m *Stage) updateCluster(ctx context.Context, u auth.User, name string, create bool, fn func(*schemas.Cluster) error) (*schemas.Cluster, error) {
	if err := m.requireAdmin(u); err != nil {
		return nil, err
	}
	if !schemas.ValidToken(name) {
		return nil, invalid(field.ErrorList{field.Invalid(field.NewPath("cluster_name"), name, "must be 1-128 letters, digits, '-' or '_'")})
	}
	kv, err := m.clustersKV(ctx)
	if err != nil {
		return nil, err
	}
	c, rev, err := m.cluster(ctx, name)
	switch {
	case create && err == nil:
		return nil, apiError(http.StatusConflict, "cluster %q already exists", name)
	case create:
		c = &schemas.Cluster{Name: name}
	case err != nil:
		return nil, err
	}
	if err := fn(c); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(c)
	if create {
		_, err = kv.Create(ctx, name, data)
	} else {
		_, err = kv.Update(ctx, name, data, rev)
	}
	switch {
	case bus.Conflict(err):
		return nil, apiError(http.StatusConflict, "cluster %q changed meanwhile: %v", name, err)
	case err != nil:
		return nil, fmt.Errorf("save cluster %q: %w", name, err)
	}
	m.log.Info("cluster updated", "cluster", name, "by", u.Name) // never the config itself
	return c, nil
}

// activateCluster marks name active and every other cluster inactive.
func (m *Stage) activateCluster(ctx context.Context, u auth.User, name string) error {
	if _, err := m.updateCluster(ctx, u, name, false, func(c *schemas.Cluster) error { c.Active = true; return nil }); err != nil {
		return err
	}
	all, err := m.Clusters(ctx, u)
	if err != nil {
		return err
	}
	for _, c := range all {
		if c.Active && c.Name != name {
			if _, err := m.updateCluster(ctx, u, c.Name, false, func(c *schemas.Cluster) error { c.Active = false; return nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *Stage) deleteCluster(ctx context.Context, u auth.User, name string) error {
	if err := m.requireAdmin(u); err != nil {
		return err
	}
	if _, _, err := m.cluster(ctx, name); err != nil {
		return err
	}
	kv, err := m.clustersKV(ctx)
	if err != nil {
		return err
	}
	return kv.Purge(ctx, name)
}

func readAll[T any](ctx context.Context, kv jetstream.KeyValue) ([]T, error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kv.Bucket(), err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var v T
		if json.Unmarshal(e.Value(), &v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}
