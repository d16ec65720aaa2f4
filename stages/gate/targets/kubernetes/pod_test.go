package kubernetes

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/pace-platform/pace/schemas"
)

func mustRuntime(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	r, err := New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func record(w schemas.WorkerSpec) *schemas.JobRecord {
	return &schemas.JobRecord{ID: "render", Spec: schemas.JobSpec{Worker: w,
		Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: "pace-jobs"}}}
}

func secretRef(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "pace-worker-nats"}, Key: key}}
}

func TestWorkerPodCredentials(t *testing.T) {
	const url = "tls://pace-nats.pace.svc:4222"
	base := []corev1.EnvVar{{Name: "PACE_NATS_URL", Value: url}, {Name: "PACE_JOB", Value: "render"},
		{Name: "PACE_WORKER_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	spec := schemas.WorkerSpec{Image: "registry.example/render:1", Env: map[string]string{"B": "2", "A": "1"}}
	specEnv := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		env     []corev1.EnvVar
		volumes []string // mounted besides /tmp, as name:key,key
		redis   bool     // worker.protocol redis
	}{
		{"no secret", Config{NATSURL: url}, nil, nil, false},
		{"the job's token (pace up --token-file)", Config{NATSURL: url, JobToken: func(job string) string { return "job:" + job + ":mac" }},
			[]corev1.EnvVar{{Name: "PACE_TOKEN", Value: "job:render:mac"}}, nil, false},
		{"the job's token and the CA (deploy/kubernetes)", Config{NATSURL: url, WorkerSecret: "pace-worker-nats",
			WorkerSecretKeys: []string{"ca.crt"}, JobToken: func(job string) string { return "job:" + job + ":mac" }}, []corev1.EnvVar{
			{Name: "PACE_TOKEN", Value: "job:render:mac"},
			{Name: "PACE_NATS_CA", Value: "/etc/pace/nats/ca.crt"},
		}, []string{"nats-credentials:ca.crt"}, false},
		{"a Redis worker: the token names the queue, and is in no other variable", Config{NATSURL: url, RedisAddr: "pace-redis.pace.svc:6379",
			JobToken: func(job string) string { return "job:" + job + ":mac" }}, []corev1.EnvVar{
			{Name: "REDIS_HOST", Value: "pace-redis.pace.svc"}, {Name: "REDIS_PORT", Value: "6379"},
			{Name: "REDIS_QUEUE", Value: "job:render:mac"},
		}, nil, true},
		{"a NATS worker beside a Redis front gets no Redis variables", Config{NATSURL: url, RedisAddr: "pace-redis.pace.svc:6379",
			JobToken: func(job string) string { return "job:" + job + ":mac" }}, []corev1.EnvVar{
			{Name: "PACE_TOKEN", Value: "job:render:mac"},
		}, nil, false},
		{"a Redis worker on an open bus: the job's id names the queue", Config{NATSURL: url, RedisAddr: "10.0.0.5:6379"},
			[]corev1.EnvVar{{Name: "REDIS_HOST", Value: "10.0.0.5"}, {Name: "REDIS_PORT", Value: "6379"}, {Name: "REDIS_QUEUE", Value: "render"}}, nil, true},
		{"password and CA (the default keys)", Config{NATSURL: url, WorkerSecret: "pace-worker-nats"}, []corev1.EnvVar{
			{Name: "PACE_NATS_USER", ValueFrom: secretRef("user")},
			{Name: "PACE_NATS_PASSWORD", ValueFrom: secretRef("password")},
			{Name: "PACE_NATS_CA", Value: "/etc/pace/nats/ca.crt"},
		}, []string{"nats-credentials:ca.crt"}, false},
		{"creds and client certificate, keys in any order", Config{NATSURL: url, WorkerSecret: "pace-worker-nats",
			WorkerSecretKeys: []string{"tls.key", "creds", "tls.crt"}}, []corev1.EnvVar{
			{Name: "PACE_NATS_CREDS", Value: "/etc/pace/nats/creds"},
			{Name: "PACE_NATS_CERT", Value: "/etc/pace/nats/tls.crt"},
			{Name: "PACE_NATS_KEY", Value: "/etc/pace/nats/tls.key"},
		}, []string{"nats-credentials:creds,tls.crt,tls.key"}, false},
		{"user and password only: no volume", Config{NATSURL: url, WorkerSecret: "pace-worker-nats",
			WorkerSecretKeys: []string{"user", "password"}}, []corev1.EnvVar{
			{Name: "PACE_NATS_USER", ValueFrom: secretRef("user")},
			{Name: "PACE_NATS_PASSWORD", ValueFrom: secretRef("password")},
		}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := spec
			if tc.redis {
				spec.Protocol = schemas.ProtocolRedis
			}
			job, err := mustRuntime(t, tc.cfg).job(record(spec), 2)
			if err != nil {
				t.Fatal(err)
			}
			pod := job.Spec.Template.Spec
			c := pod.Containers[0]
			want := append(append(append([]corev1.EnvVar{}, base...), tc.env...), specEnv...)
			if diff := cmp.Diff(want, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			var got []string
			for _, v := range pod.Volumes {
				if v.Secret == nil {
					continue
				}
				var keys []string
				for _, it := range v.Secret.Items {
					keys = append(keys, it.Key)
					if it.Path != it.Key {
						t.Errorf("key %s at %s, want its own name", it.Key, it.Path)
					}
				}
				got = append(got, v.Name+":"+strings.Join(keys, ","))
				if v.Secret.SecretName != tc.cfg.WorkerSecret || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440 {
					t.Errorf("volume %s: Secret %s mode %v, want %s readable by owner and group only", v.Name, v.Secret.SecretName, v.Secret.DefaultMode, tc.cfg.WorkerSecret)
				}
			}
			if diff := cmp.Diff(tc.volumes, got); diff != "" {
				t.Errorf("Secret volumes (-want +got):\n%s", diff)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m
			}
			if m := mounts["tmp"]; m.MountPath != "/tmp" || m.ReadOnly {
				t.Errorf("mount tmp = %+v, want a writable /tmp", m)
			}
			if m, ok := mounts["nats-credentials"]; ok != (tc.volumes != nil) || ok && (m.MountPath != CredentialsDir || !m.ReadOnly) {
				t.Errorf("mount nats-credentials = %+v (present %v), want read-only at %s when the Secret has files", m, ok, CredentialsDir)
			}
		})
	}
}

func TestWorkerPodIsRestricted(t *testing.T) {
	job, err := mustRuntime(t, Config{NATSURL: "nats://n:4222"}).job(record(schemas.WorkerSpec{Image: "i",
		Resources: &schemas.Resources{Limits: map[string]string{"cpu": "1", "memory": "256Mi"}, Requests: map[string]string{"cpu": "250m"}}}), 1)
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	psc, sc := pod.SecurityContext, pod.Containers[0].SecurityContext
	for what, ok := range map[string]bool{
		"automountServiceAccountToken false":      pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken,
		"runAsNonRoot":                            psc.RunAsNonRoot != nil && *psc.RunAsNonRoot,
		"runAsUser 65532":                         psc.RunAsUser != nil && *psc.RunAsUser == WorkerUID,
		"runAsGroup and fsGroup 65532":            *psc.RunAsGroup == WorkerUID && *psc.FSGroup == WorkerUID,
		"seccomp RuntimeDefault":                  psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"allowPrivilegeEscalation false":          sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		"readOnlyRootFilesystem":                  sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		"capabilities drop ALL":                   sc.Capabilities != nil && cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}),
		"no privileged container":                 sc.Privileged == nil,
		"cpu limit 1, request 250m; memory 256Mi": pod.Containers[0].Resources.Limits.Cpu().String() == "1" && pod.Containers[0].Resources.Requests.Cpu().String() == "250m" && pod.Containers[0].Resources.Limits.Memory().String() == "256Mi",
	} {
		if !ok {
			t.Errorf("worker pod: want %s", what)
		}
	}
}

func TestWorkerPodSecurityRelaxedOnlyAsAsked(t *testing.T) {
	r := mustRuntime(t, Config{NATSURL: "nats://n:4222"})
	build := func(sec *schemas.WorkerSecurity) corev1.PodSpec {
		job, err := r.job(record(schemas.WorkerSpec{Image: "i", Security: sec}), 1)
		if err != nil {
			t.Fatal(err)
		}
		return job.Spec.Template.Spec
	}
	own := build(&schemas.WorkerSecurity{ImageUser: true, WritableRoot: true})
	psc, sc := own.SecurityContext, own.Containers[0].SecurityContext
	if psc.RunAsUser != nil || psc.RunAsNonRoot != nil || psc.FSGroup != nil || *sc.ReadOnlyRootFilesystem ||
		*sc.AllowPrivilegeEscalation || sc.Privileged != nil || psc.SeccompProfile == nil {
		t.Errorf("image user, writable root: pod %+v, container %+v", psc, sc)
	}
	sgx := build(&schemas.WorkerSecurity{Privileged: true, HostDevices: []string{"/dev/isgx"}})
	c := sgx.Containers[0]
	if !*c.SecurityContext.Privileged || !*c.SecurityContext.ReadOnlyRootFilesystem || *sgx.SecurityContext.RunAsUser != WorkerUID {
		t.Errorf("privileged: pod %+v, container %+v", sgx.SecurityContext, c.SecurityContext)
	}
	var dev *corev1.Volume
	for i, v := range sgx.Volumes {
		if v.HostPath != nil {
			dev = &sgx.Volumes[i]
		}
	}
	if dev == nil || dev.HostPath.Path != "/dev/isgx" || *dev.HostPath.Type != corev1.HostPathCharDev ||
		!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == dev.Name && m.MountPath == "/dev/isgx" }) {
		t.Errorf("privileged: /dev/isgx not mounted from the node: volumes %+v, mounts %+v", sgx.Volumes, c.VolumeMounts)
	}
}

func TestWorkerPodRefusesABadSpec(t *testing.T) {
	r := mustRuntime(t, Config{NATSURL: "nats://n:4222"})
	if _, err := r.job(record(schemas.WorkerSpec{}), 1); !errors.Is(err, ErrNoImage) {
		t.Errorf("no image: err = %v, want ErrNoImage", err)
	}
	_, err := r.job(record(schemas.WorkerSpec{Image: "i", Resources: &schemas.Resources{Requests: map[string]string{"memory": "lots"}}}), 1)
	if err == nil || !strings.Contains(err.Error(), `worker.resources.requests.memory: "lots"`) {
		t.Errorf("bad quantity: err = %v, want it named", err)
	}
}

// A Pace spec's worker.exec runs in the pod as it runs locally, under `pace
// worker`, done within nine tenths of the pod's termination grace; a
// worker.command runs as given.
func TestWorkerPodRunsExecUnderPaceWorker(t *testing.T) {
	r := mustRuntime(t, Config{NATSURL: "nats://n:4222"})
	for _, tc := range []struct {
		worker schemas.WorkerSpec
		want   []string
	}{
		{schemas.WorkerSpec{Image: "i", Exec: "tr a-z A-Z"},
			[]string{"pace", "worker", "$(PACE_JOB)", "--exec", "tr a-z A-Z", "--grace", "27s"}},
		{schemas.WorkerSpec{Image: "i", Exec: "wc -c", ExecMode: schemas.ExecLines, TerminationGrace: schemas.Duration(10 * time.Second)},
			[]string{"pace", "worker", "$(PACE_JOB)", "--exec", "wc -c", "--grace", "9s", "--exec-mode", "lines"}},
		{schemas.WorkerSpec{Image: "i", Command: []string{"render", "--fast"}}, []string{"render", "--fast"}},
		{schemas.WorkerSpec{Image: "i"}, nil}, // the image's entrypoint
	} {
		j, err := r.job(record(tc.worker), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := j.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, tc.want) {
			t.Errorf("worker %+v: command %q, want %q", tc.worker, got, tc.want)
		}
	}
}
