package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestNATSStatefulSetRunsDeployNATS checks that the StatefulSet runs the
// configuration of deploy/nats: the files its ConfigMap is generated from
// are copies of deploy/nats's, and nats-server's own flag and config
// parsing, given the container's arguments and each pod's environment,
// yields a server named after its pod, on the Services' ports, routing to
// every pod of the StatefulSet, with JetStream on its volume.
func TestNATSStatefulSetRunsDeployNATS(t *testing.T) {
	natsDir := filepath.Join(repo, base, "nats")
	confs, err := filepath.Glob(filepath.Join(natsDir, "*.conf"))
	if err != nil || len(confs) == 0 {
		t.Fatalf("no NATS configuration in %s (%v)", natsDir, err)
	}
	for _, f := range confs {
		mine, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join(repo, "deploy", "nats", filepath.Base(f)))
		if err != nil {
			t.Fatalf("%s has no original in deploy/nats: %v", filepath.Base(f), err)
		}
		if !bytes.Equal(mine, theirs) {
			t.Errorf("%s differs from deploy/nats/%[1]s: copy it again", filepath.Base(f))
		}
	}

	objs := render(t, base)
	ss := typed[appsv1.StatefulSet](t, find(t, objs, "StatefulSet", "pace-nats"))
	c := ss.Spec.Template.Spec.Containers[0]
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = int(p.ContainerPort)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	replicas := int(*ss.Spec.Replicas)
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", ss.Name, i)
		t.Run(pod, func(t *testing.T) {
			secrets := testSecrets(t)
			vols := natsVolumes(t, secrets)
			opts := natsOptions(t, ss, pod, vols, secrets)
			if opts.ServerName != pod {
				t.Errorf("server_name = %q, want the pod's name %q", opts.ServerName, pod)
			}
			if opts.Port != ports["client"] || opts.Cluster.Port != ports["cluster"] || opts.HTTPPort != ports["monitor"] {
				t.Errorf("ports client %d, cluster %d, monitor %d; the container declares %v",
					opts.Port, opts.Cluster.Port, opts.HTTPPort, ports)
			}
			if !opts.JetStream || !strings.HasPrefix(opts.StoreDir, vols["data"]+"/") {
				t.Errorf("JetStream %v in %q: want it on the data volume (%s)", opts.JetStream, opts.StoreDir, mounts["data"])
			}
			var routes []string
			for _, r := range opts.Routes {
				routes = append(routes, r.Host)
			}
			var want []string
			for j := range replicas {
				want = append(want, fmt.Sprintf("%s-%d.%s.%s.svc:%d", ss.Name, j, ss.Spec.ServiceName, ss.Namespace, ports["cluster"]))
			}
			if strings.Join(routes, " ") != strings.Join(want, " ") {
				t.Errorf("routes %v, want every pod of the StatefulSet %v", routes, want)
			}
			if i == 0 { // the same for every pod
				checkUsers(t, objs, opts)
			}
		})
	}
	svc := typed[corev1.Service](t, find(t, objs, "Service", ss.Spec.ServiceName))
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: want headless and publishing not-ready pods, so that the routes resolve before the cluster forms", svc.Name)
	}
}

// natsOptions returns what nats-server makes of the StatefulSet's container
// arguments and environment in pod, with each mounted volume's path (in
// arguments and variables) replaced by the local directory of volumes, and
// Secrets resolved as resolveSecret does.
func natsOptions(t *testing.T, ss *appsv1.StatefulSet, pod string, volumes map[string]string,
	secrets map[string]map[string]string) *server.Options {
	t.Helper()
	c := ss.Spec.Template.Spec.Containers[0]
	local := mountMapper(t, c.VolumeMounts, volumes)
	for _, e := range c.Env {
		t.Setenv(e.Name, local(resolveSecret(t, secrets, e, pod)))
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = local(a)
	}
	opts, err := server.ConfigureOptions(flag.NewFlagSet("nats-server", flag.ContinueOnError), args,
		func() { t.Error("version printed") }, func() { t.Error("help printed") }, func() { t.Error("TLS help printed") })
	if err != nil {
		t.Fatalf("nats-server %s: %v", strings.Join(args, " "), err)
	}
	return opts
}

// natsVolumes are the local contents of the StatefulSet's volumes: the
// configuration copies of this repository and a test TLS certificate.
func natsVolumes(t *testing.T, secrets map[string]map[string]string) map[string]string {
	t.Helper()
	tlsDir := t.TempDir()
	for name, data := range secrets["pace-nats-tls"] {
		if err := os.WriteFile(filepath.Join(tlsDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{"config": filepath.Join(repo, base, "nats"), "tls": tlsDir, "data": t.TempDir(), "run": t.TempDir()}
}

// mountMapper returns a function replacing a mount path that starts a
// string, the longest first, by the local directory of its volume.
func mountMapper(t *testing.T, mounts []corev1.VolumeMount, volumes map[string]string) func(string) string {
	t.Helper()
	mounts = slices.Clone(mounts)
	slices.SortFunc(mounts, func(a, b corev1.VolumeMount) int { return len(b.MountPath) - len(a.MountPath) })
	for _, m := range mounts {
		if _, ok := volumes[m.Name]; !ok {
			t.Fatalf("volume %s: no local contents", m.Name)
		}
	}
	return func(s string) string {
		for _, m := range mounts {
			if i := strings.Index(s, m.MountPath+"/"); i >= 0 && (i == 0 || s[i-1] == '=') {
				return s[:i] + volumes[m.Name] + s[i+len(m.MountPath):]
			}
		}
		return s
	}
}

// resolve returns the value a pod named pod sees for e: secrets resolve to
// "secret:NAME:KEY", so that a password can be traced to its Secret key.
func resolve(t *testing.T, e corev1.EnvVar, pod string) string {
	t.Helper()
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
		return pod
	case e.ValueFrom.SecretKeyRef != nil:
		return "secret:" + e.ValueFrom.SecretKeyRef.Name + ":" + e.ValueFrom.SecretKeyRef.Key
	}
	t.Fatalf("env %s: a source this test does not resolve", e.Name)
	return ""
}

// checkUsers checks that each stage connects as a user of the server's
// configuration, with the password the server reads from the same Secret
// key. Workers and tenants have no user: they log in by token through the
// auth callout (TestNATSAuthCalloutWiring).
func checkUsers(t *testing.T, objs []*unstructured.Unstructured, opts *server.Options) {
	t.Helper()
	users := map[string]string{}
	for _, u := range opts.Users {
		users[u.Username] = u.Password
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := typed[appsv1.Deployment](t, o)
		env := map[string]string{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = resolve(t, e, d.Name)
		}
		user, password := env["PACE_NATS_USER"], env["PACE_NATS_PASSWORD"]
		if want, ok := users[user]; !ok || want != password || !strings.HasPrefix(password, "secret:") {
			t.Errorf("Deployment %s connects as %q with %q; the server has %q for that user", d.Name, user, password, want)
		}
	}
}
