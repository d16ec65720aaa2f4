package kubernetes

import (
	"fmt"
	"maps"
	"net"
	"path"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pace-platform/pace/schemas"
)

// WorkerUID is the user and group that worker containers run as: the
// nonroot user of Pace's image (distroless's 65532). A worker image's files
// must be readable by it.
const WorkerUID = 65532

// Names of the volumes of a worker pod.
const (
	volumeTmp         = "tmp"
	volumeCredentials = "nats-credentials"
)

// workerCommand is the command of w's worker container: worker.command, or
// worker.exec run as the local actuator runs it, under `pace worker` (which
// the image must hold on its PATH, as Pace's own image does), finishing
// its items within nine tenths of the pod's termination grace.
func workerCommand(w schemas.WorkerSpec, graceSeconds int64) []string {
	if len(w.Command) > 0 || w.Exec == "" {
		return w.Command
	}
	grace := time.Duration(graceSeconds) * time.Second
	cmd := []string{"pace", "worker", "$(PACE_JOB)", "--exec", w.Exec, "--grace", (grace - grace/10).String()}
	if w.ExecMode != "" {
		cmd = append(cmd, "--exec-mode", w.ExecMode)
	}
	return cmd
}

// job builds the Kubernetes Job of rec with parallelism replicas.
func (r *Runtime) job(rec *schemas.JobRecord, replicas int) (*batchv1.Job, error) {
	w := rec.Spec.Worker
	if w.Image == "" {
		return nil, ErrNoImage
	}
	labels := map[string]string{LabelJob: rec.ID, LabelManagedBy: "pace"}
	env := []corev1.EnvVar{{Name: "PACE_NATS_URL", Value: r.cfg.NATSURL}, {Name: "PACE_JOB", Value: rec.ID},
		// The worker's id is its pod's name: the presence it announces is
		// the one the pod watch keeps for the running pod.
		{Name: "PACE_WORKER_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	// Workers get the credential of the protocol they speak only.
	if r.cfg.JobToken != nil && !w.SpeaksRedis() {
		env = append(env, corev1.EnvVar{Name: "PACE_TOKEN", Value: r.cfg.JobToken(rec.ID)})
	}
	if host, port, err := net.SplitHostPort(r.cfg.RedisAddr); err == nil && w.SpeaksRedis() {
		queue := rec.ID
		if r.cfg.JobToken != nil {
			queue = r.cfg.JobToken(rec.ID)
		}
		env = append(env, corev1.EnvVar{Name: "REDIS_HOST", Value: host}, corev1.EnvVar{Name: "REDIS_PORT", Value: port},
			corev1.EnvVar{Name: "REDIS_QUEUE", Value: queue})
	}
	credEnv, volumes, mounts := r.credentials()
	env = append(env, credEnv...)
	for _, k := range slices.Sorted(maps.Keys(w.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: w.Env[k]})
	}
	volumes = append(volumes, corev1.Volume{Name: volumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts = append(mounts, corev1.VolumeMount{Name: volumeTmp, MountPath: "/tmp"})
	devVolumes, devMounts := hostDevices(w.Security)
	volumes, mounts = append(volumes, devVolumes...), append(mounts, devMounts...)
	grace := int64(30)
	if w.TerminationGrace > 0 {
		grace = int64(w.TerminationGrace.D() / time.Second)
	}
	container := corev1.Container{Name: WorkerContainer, Image: w.Image, Command: workerCommand(w, grace), Env: env,
		VolumeMounts: mounts, SecurityContext: containerSecurity(w.Security)}
	if w.Resources != nil {
		limits, err := quantities("worker.resources.limits", w.Resources.Limits)
		if err != nil {
			return nil, err
		}
		requests, err := quantities("worker.resources.requests", w.Resources.Requests)
		if err != nil {
			return nil, err
		}
		container.Resources = corev1.ResourceRequirements{Limits: limits, Requests: requests}
	}
	var pullSecrets []corev1.LocalObjectReference
	for _, s := range w.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s})
	}
	parallelism := int32(replicas) //nolint:gosec // bounded by the spec's max replicas
	backoffLimit := int32(1000)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: Name(rec.ID), Namespace: namespace(rec), Labels: labels},
		Spec: batchv1.JobSpec{
			Parallelism:  &parallelism,
			BackoffLimit: &backoffLimit,
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					Containers:                    []corev1.Container{container},
					Volumes:                       volumes,
					NodeSelector:                  w.NodeSelector,
					ImagePullSecrets:              pullSecrets,
					TerminationGracePeriodSeconds: &grace,
					AutomountServiceAccountToken:  new(false), // workers talk to NATS, never to Kubernetes
					SecurityContext:               podSecurity(w.Security),
				},
			},
		},
	}, nil
}

// credentials returns what a worker container needs to use the worker
// Secret: a secretKeyRef per value key, and for the file keys one
// read-only Secret volume with the variables naming their paths. The
// values stay in the Secret; the runtime never reads it.
func (r *Runtime) credentials() ([]corev1.EnvVar, []corev1.Volume, []corev1.VolumeMount) {
	if r.cfg.WorkerSecret == "" {
		return nil, nil, nil
	}
	keys := r.cfg.keys()
	var env []corev1.EnvVar
	var items []corev1.KeyToPath
	for _, k := range secretKeys { // in a fixed order, whatever the order of the keys
		switch {
		case !slices.Contains(keys, k.Key):
		case k.File:
			items = append(items, corev1.KeyToPath{Key: k.Key, Path: k.Key})
			env = append(env, corev1.EnvVar{Name: k.Env, Value: path.Join(CredentialsDir, k.Key)})
		default:
			env = append(env, corev1.EnvVar{Name: k.Env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: r.cfg.WorkerSecret}, Key: k.Key}}})
		}
	}
	if len(items) == 0 {
		return env, nil, nil
	}
	volumes := []corev1.Volume{{Name: volumeCredentials, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: r.cfg.WorkerSecret, Items: items, DefaultMode: new(int32(0o440)), // read by the group, fsGroup
	}}}}
	mounts := []corev1.VolumeMount{{Name: volumeCredentials, MountPath: CredentialsDir, ReadOnly: true}}
	return env, volumes, mounts
}

// podSecurity meets the restricted Pod Security Standard: a non-root user
// and group, which also owns the pod's volumes, and the runtime's default
// seccomp profile. With sec.ImageUser the image's user runs instead.
func podSecurity(sec *schemas.WorkerSecurity) *corev1.PodSecurityContext {
	ps := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if sec == nil || !sec.ImageUser {
		ps.RunAsNonRoot, ps.RunAsUser, ps.RunAsGroup, ps.FSGroup = new(true), new(int64(WorkerUID)), new(int64(WorkerUID)), new(int64(WorkerUID))
	}
	return ps
}

// containerSecurity meets the restricted Pod Security Standard and keeps the
// root filesystem read-only: a worker writes to /tmp (an emptyDir, counted
// against an ephemeral-storage limit when the spec sets one). sec relaxes
// it: a writable root filesystem, or a privileged container.
func containerSecurity(sec *schemas.WorkerSecurity) *corev1.SecurityContext {
	if sec != nil && sec.Privileged {
		return &corev1.SecurityContext{Privileged: new(true), ReadOnlyRootFilesystem: new(!sec.WritableRoot)}
	}
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(sec == nil || !sec.WritableRoot),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// hostDevices mounts the devices of a privileged worker (sec.HostDevices)
// from its node, each at its own path.
func hostDevices(sec *schemas.WorkerSecurity) ([]corev1.Volume, []corev1.VolumeMount) {
	if sec == nil || !sec.Privileged {
		return nil, nil
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for i, d := range sec.HostDevices {
		name := fmt.Sprintf("host-device-%d", i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: d, Type: new(corev1.HostPathCharDev)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: d})
	}
	return volumes, mounts
}

// quantities parses a spec's resource map; p names it in errors.
func quantities(p string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %q: %w", p, k, v, err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
