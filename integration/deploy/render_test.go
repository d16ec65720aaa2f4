package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// The kustomizations under test: the base and the overlay example.
const (
	base       = "deploy/kubernetes/base"
	devOverlay = "deploy/kubernetes/overlays/dev"
)

// render runs the real kustomize build on dir (relative to the repository)
// and returns the objects it prints.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(filepath.Join(kubeBin, "kustomize"), "build", filepath.Join(repo, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.Bytes())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kustomize build %s: decode: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return objs
}

// find returns the rendered object of kind and name, failing the test when
// there is none.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered objects", kind, name)
	return nil
}

// typed converts a rendered object into its Go type.
func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// warnings records the apiserver's Warning headers: unknown or duplicate
// fields under fieldValidation=Warn, and Pod Security violations of a
// namespace's warn level on workloads.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// applier server-side applies rendered objects as the admin, for real or
// with dryRun=All, with strict field validation.
type applier struct {
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *warnings
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(cp.Admin)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), warnings: w}
}

// apply server-side applies u and returns the apiserver's error and
// warnings.
func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) ([]string, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			return nil, errors.New("namespaced object without a namespace")
		}
		ri = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "pace-deploy-test", Force: &force, FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	a.warnings.take()
	_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
	return a.warnings.take(), err
}

func objectName(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}

// TestManifestsPassTheAPIServer renders the base and the dev overlay with
// kustomize and applies every object to a real kube-apiserver with
// server-side dry-run: the apiserver's validation, strict field checking
// and admission judge each field. The namespaces are applied for real
// first, with their Pod Security labels, so that the PodSecurity admission
// plugin checks every pod template against the restricted standard (its
// violations come back as warnings, which fail the test).
func TestManifestsPassTheAPIServer(t *testing.T) {
	for _, dir := range []string{base, devOverlay} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ctx := context.Background()
			objs := render(t, dir)
			a := newApplier(t)
			restricted := false
			for _, o := range objs {
				if o.GetKind() != "Namespace" {
					continue
				}
				if o.GetLabels()["pod-security.kubernetes.io/warn"] == "restricted" {
					restricted = true
				}
				if warns, err := a.apply(ctx, o, false); err != nil || len(warns) > 0 {
					t.Fatalf("%s: %v %q", objectName(o), err, warns)
				}
			}
			if !restricted {
				t.Error("no namespace warns about the restricted Pod Security Standard: the pod templates go unchecked")
			}
			kinds := map[string]int{}
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					continue
				}
				warns, err := a.apply(ctx, o, true)
				if err != nil {
					t.Errorf("%s: %v", objectName(o), err)
					continue
				}
				for _, w := range warns {
					t.Errorf("%s: warning: %s", objectName(o), w)
				}
				if len(warns) == 0 {
					kinds[o.GetKind()]++
				}
			}
			t.Logf("accepted by kube-apiserver without warnings (dry run): %v", kinds)
		})
	}
}
