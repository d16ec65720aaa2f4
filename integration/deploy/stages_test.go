package deploy

import (
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// pace runs the image's binary and returns its output, failing the test
// when it exits non-zero.
func pace(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(imageBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pace %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var stagesLine = regexp.MustCompile(`(?m)^Stages: (.+)\.$`)

// stageNames returns the stages that pace stage --help lists.
func stageNames(t *testing.T) []string {
	t.Helper()
	m := stagesLine.FindStringSubmatch(pace(t, "stage", "--help"))
	if m == nil {
		t.Fatal(`pace stage --help lists no "Stages: a, b, c."`)
	}
	return strings.Split(m[1], ", ")
}

// flagEnv maps each PACE_* variable that a command's help names to its flag.
var flagEnv = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+) [^\n]*?\(env (PACE_[A-Z0-9_]+)\)`)

// secretInURL matches a URL carrying a password (scheme://user:password@).
var secretInURL = regexp.MustCompile(`://[^/@\s]*:[^/@\s]+@`)

// secretName matches variable names whose values must come from a Secret.
var secretName = regexp.MustCompile(`(?i)password|passwd|token|secret|private`)

// podEnv returns the variables of c with literal values: its env and the
// data of the rendered ConfigMaps that its envFrom names. It fails the test
// on a secret given inline.
func podEnv(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", from.ConfigMapRef.Name))
		maps.Copy(env, cm.Data)
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case secretName.MatchString(e.Name) && e.ValueFrom.SecretKeyRef == nil:
			t.Errorf("env %s must come from a Secret", e.Name)
		}
	}
	for k, v := range env {
		if secretName.MatchString(k) || secretInURL.MatchString(v) {
			t.Errorf("env %s=%q: a secret given inline; take it from a Secret", k, v)
		}
	}
	return env
}

// TestStageDeployments checks every stage that pace stage lists against its
// Deployment in the base: the container's arguments and PACE_* variables
// (with their values) are accepted by the real pace stage command; no
// secret is inline; the pod is locked down beyond what Pod Security's
// restricted level checks; probes, resources, replicas and the disruption
// budget fit the stage; and only the gate carries a Kubernetes token.
func TestStageDeployments(t *testing.T) {
	stages := stageNames(t)
	objs := render(t, base)
	for _, o := range objs {
		if o.GetKind() == "Deployment" && !slices.Contains(stages, o.GetLabels()["app.kubernetes.io/component"]) {
			t.Errorf("Deployment %s runs no stage of pace stage's list %v", o.GetName(), stages)
		}
	}
	for _, name := range stages {
		t.Run(name, func(t *testing.T) {
			d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "pace-"+name))
			pod := d.Spec.Template.Spec
			if len(pod.Containers) != 1 || pod.Containers[0].Name != "pace" {
				t.Fatalf("want one container named pace, got %d", len(pod.Containers))
			}
			c := pod.Containers[0]
			if len(c.Args) < 2 || c.Args[0] != "stage" || c.Args[1] != name {
				t.Fatalf("args %q: want stage %s ...", c.Args, name)
			}

			// The arguments, then every variable as the flag it sets (so that
			// its value is parsed too): cobra refuses an unknown flag or a bad
			// value before it prints the help.
			help := pace(t, append(slices.Clone(c.Args), "--help")...)
			flags := map[string]string{}
			for _, m := range flagEnv.FindAllStringSubmatch(help, -1) {
				flags[m[2]] = m[1]
			}
			env := podEnv(t, objs, c)
			args := slices.Clone(c.Args)
			for _, k := range slices.Sorted(maps.Keys(env)) {
				if !strings.HasPrefix(k, "PACE_") {
					continue
				}
				flag, ok := flags[k]
				if !ok {
					t.Errorf("env %s: pace stage %s reads no such variable", k, name)
					continue
				}
				args = append(args, "--"+flag+"="+env[k])
			}
			pace(t, append(args, "--help")...)
			for _, e := range c.Env { // and those set from the pod or a Secret
				if _, ok := flags[e.Name]; e.ValueFrom != nil && strings.HasPrefix(e.Name, "PACE_") && !ok {
					t.Errorf("env %s: pace stage %s reads no such variable", e.Name, name)
				}
			}

			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("container root filesystem is writable: want readOnlyRootFilesystem")
			}
			if psc := pod.SecurityContext; psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != nonRootUID {
				t.Errorf("pod must run as the image's user %d", nonRootUID)
			}
			for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "http" {
					t.Errorf("%s probe: want an HTTP GET on port http", probe)
				}
			}
			if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/livez" {
				t.Errorf("liveness probe path %s, want /livez", c.LivenessProbe.HTTPGet.Path)
			}
			if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("readiness probe path %s, want /readyz", c.ReadinessProbe.HTTPGet.Path)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("no %s request", r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("no %s limit", r)
				}
			}

			// Two replicas: an active and a standby for a leader-elected
			// stage, two actives otherwise; the budget keeps one.
			if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
				t.Errorf("replicas %v, want at least 2", d.Spec.Replicas)
			}
			pdb := typed[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", "pace-"+name))
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
			}
			if !apiequality.Semantic.DeepEqual(pdb.Spec.Selector, d.Spec.Selector) {
				t.Errorf("PodDisruptionBudget selects %v, the Deployment %v", pdb.Spec.Selector, d.Spec.Selector)
			}

			token := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken
			if want := pod.ServiceAccountName == "pace-"+name && name == "gate"; token != want {
				t.Errorf("service account %q, token mounted %v: only the gate talks to Kubernetes", pod.ServiceAccountName, token)
			}
		})
	}
}
