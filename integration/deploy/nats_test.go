package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
			for _, e := range c.Env {
				v := e.Value
				if e.ValueFrom != nil {
					if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
						t.Fatalf("env %s: only the pod name is resolved by this test", e.Name)
					}
					v = pod
				}
				t.Setenv(e.Name, v)
			}
			// The ConfigMap's mount becomes the directory of the copies.
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = strings.Replace(a, "="+mounts["config"]+"/", "="+natsDir+"/", 1)
			}
			opts, err := server.ConfigureOptions(flag.NewFlagSet("nats-server", flag.ContinueOnError), args,
				func() { t.Error("version printed") }, func() { t.Error("help printed") }, func() { t.Error("TLS help printed") })
			if err != nil {
				t.Fatalf("nats-server %s: %v", strings.Join(args, " "), err)
			}
			if opts.ServerName != pod {
				t.Errorf("server_name = %q, want the pod's name %q", opts.ServerName, pod)
			}
			if opts.Port != ports["client"] || opts.Cluster.Port != ports["cluster"] || opts.HTTPPort != ports["monitor"] {
				t.Errorf("ports client %d, cluster %d, monitor %d; the container declares %v",
					opts.Port, opts.Cluster.Port, opts.HTTPPort, ports)
			}
			if !opts.JetStream || !strings.HasPrefix(opts.StoreDir, mounts["data"]+"/") {
				t.Errorf("JetStream %v in %q: want it on the data volume %s", opts.JetStream, opts.StoreDir, mounts["data"])
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
		})
	}
	svc := typed[corev1.Service](t, find(t, objs, "Service", ss.Spec.ServiceName))
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: want headless and publishing not-ready pods, so that the routes resolve before the cluster forms", svc.Name)
	}
}
