package deploy

import (
	"crypto/rand"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/natsauth"
)

// testSecrets returns the contents of the Secrets that docs/deploy.md has
// the operator create, by name and key, with a new test CA and a loopback
// certificate, a new callout key and job token key. Passwords
// (secretKeyRef to pace-nats-users) resolve as in resolve, the same on the
// NATS servers' side and the stages'.
func testSecrets(t *testing.T) map[string]map[string]string {
	t.Helper()
	files := bustest.TLS(t)
	issuer, pub, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := issuer.Seed()
	if err != nil {
		t.Fatal(err)
	}
	jobKey := make([]byte, 32)
	_, _ = rand.Read(jobKey)
	read := func(f string) string {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	secrets := map[string]map[string]string{
		"pace-api-tokens": {"tokens.csv": testToken + ",alice,alice-uid,\"tenants\"\n"},
		"pace-nats-tls":   {"tls.crt": read(files.Cert), "tls.key": read(files.Key), "ca.crt": read(files.CA)},
		// nk -gen account > callout.nk; the issuer is nk -inkey callout.nk -pubout
		"pace-nats-callout": {"callout.nk": string(seed) + "\n", "issuer": pub},
		"pace-job-token":    {"job-token.key": string(jobKey)}, // head -c 32 /dev/urandom
	}
	secrets["pace-worker-nats"] = workerSecrets(secrets)
	return secrets
}

// workerSecrets returns the test contents of the worker Secret as
// docs/deploy.md has the operator create it: the CA of pace-nats-tls, and
// no credentials (the workers log in with their job's token).
func workerSecrets(secrets map[string]map[string]string) map[string]string {
	return map[string]string{"ca.crt": secrets["pace-nats-tls"]["ca.crt"]}
}

// resolveSecret is resolve, with a Secret that has test contents resolved
// to its value.
func resolveSecret(t *testing.T, secrets map[string]map[string]string, e corev1.EnvVar, pod string) string {
	t.Helper()
	if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil && secrets[ref.SecretKeyRef.Name] != nil {
		v, ok := secrets[ref.SecretKeyRef.Name][ref.SecretKeyRef.Key]
		if !ok {
			t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
		}
		return v
	}
	return resolve(t, e, pod)
}

// flagValue returns the value of the container's argument --name=VALUE of
// Deployment d, and false without one.
func flagValue(d *appsv1.Deployment, name string) (string, bool) {
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// secretFile returns the Secret and key that file, a path in the container
// of Deployment d, comes from: the Secret volume mounted at its directory.
func secretFile(t *testing.T, d *appsv1.Deployment, file string) (secret, key string) {
	t.Helper()
	pod := d.Spec.Template.Spec
	for _, m := range pod.Containers[0].VolumeMounts {
		if path.Dir(file) != m.MountPath {
			continue
		}
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Volumes[i].Secret == nil {
			t.Fatalf("%s: %s is not in a Secret volume", d.Name, file)
		}
		v := pod.Volumes[i].Secret
		if len(v.Items) == 0 {
			return v.SecretName, path.Base(file)
		}
		for _, it := range v.Items {
			if it.Path == path.Base(file) {
				return v.SecretName, it.Key
			}
		}
		t.Fatalf("%s: volume %s holds no %s", d.Name, m.Name, path.Base(file))
	}
	t.Fatalf("%s: nothing is mounted at %s", d.Name, path.Dir(file))
	return "", ""
}

// TestNATSAuthCalloutWiring checks that the NATS servers' auth callout and
// the manager that answers it agree, as docs/security.md ("Tenants in
// distributed mode") has them: the servers, as nats-server parses the
// StatefulSet, trust the public key of the account seed that the
// manager's --nats-callout-key reads; every static user skips the callout
// (the stages log in with their passwords) and no user is left for workers
// or tenants (pace-worker, pace-client), who log in by token; the manager
// knows the tenants (--token-file) and the workers' tokens
// (--job-token-key), whose key the gate shares, and the gate gives worker
// pods no credentials but their job's token.
func TestNATSAuthCalloutWiring(t *testing.T) {
	objs := render(t, base)
	secrets := testSecrets(t)
	ss := typed[appsv1.StatefulSet](t, find(t, objs, "StatefulSet", "pace-nats"))
	opts := natsOptions(t, ss, ss.Name+"-0", natsVolumes(t, secrets), secrets)
	if opts.AuthCallout == nil {
		t.Fatal("the NATS servers run no auth callout: tenants and workers cannot log in")
	}
	var users []string
	for _, u := range opts.Users {
		users = append(users, u.Username)
	}
	if got, want := slices.Sorted(slices.Values(opts.AuthCallout.AuthUsers)), slices.Sorted(slices.Values(users)); !slices.Equal(got, want) {
		t.Errorf("auth_users %v, want every user of the server %v", got, want)
	}
	for _, u := range []string{"pace-worker", "pace-client"} {
		if slices.Contains(users, u) {
			t.Errorf("user %s, whose rights span every job: want workers and tenants by token", u)
		}
	}

	manager := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "pace-manager"))
	gate := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "pace-gate"))
	keyFile, ok := flagValue(manager, "--nats-callout-key")
	if !ok {
		t.Fatal("the manager runs no authorization service: want --nats-callout-key")
	}
	name, key := secretFile(t, manager, keyFile)
	kp, err := nkeys.FromSeed([]byte(secrets[name][key]))
	if err != nil {
		t.Fatalf("--nats-callout-key: Secret %s key %s: %v", name, key, err)
	}
	if pub, err := kp.PublicKey(); err != nil || pub != opts.AuthCallout.Issuer {
		t.Errorf("the manager signs with %s (Secret %s key %s), the servers trust %s", pub, name, key, opts.AuthCallout.Issuer)
	}
	if file, ok := flagValue(manager, "--token-file"); !ok {
		t.Error("the manager knows no tenants: want --token-file")
	} else if name, key := secretFile(t, manager, file); name != "pace-api-tokens" {
		t.Errorf("--token-file from Secret %s key %s, want the API's tokens (pace-api-tokens)", name, key)
	}
	var jobKeys []string
	for _, d := range []*appsv1.Deployment{manager, gate} {
		file, ok := flagValue(d, "--job-token-key")
		if !ok {
			t.Errorf("%s: no --job-token-key", d.Name)
			continue
		}
		name, key := secretFile(t, d, file)
		jobKeys = append(jobKeys, name+" key "+key)
	}
	if len(jobKeys) == 2 && jobKeys[0] != jobKeys[1] {
		t.Errorf("job token keys: the manager's from Secret %s, the gate's from %s: want one", jobKeys[0], jobKeys[1])
	}
	if errs := gateRuntimeConfig(t, objs, secrets).Validate(); len(errs) > 0 {
		t.Errorf("the gate's Kubernetes runtime: %v", errs.ToAggregate())
	}
}
