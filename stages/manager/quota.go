package manager

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pace-platform/pace/schemas"
)

// quotaTimeout bounds the look at a cluster's quotas during a submission:
// an unreachable cluster delays no one for longer, and refuses nothing.
const quotaTimeout = 3 * time.Second

// checkQuota refuses a Kubernetes job whose replicas.max its namespace
// cannot hold, when Pace knows the job's cluster (a registered one: the
// one the job names, else the active one): the room its ResourceQuotas
// leave for pods, and for the pods' cpu and memory requests. Without a
// registered cluster, or one that cannot be read within quotaTimeout (or
// whose kubeconfig may not list resourcequotas), nothing is refused; the
// failure policy's pods rule catches pods that cannot run.
func (m *Stage) checkQuota(ctx context.Context, spec *schemas.JobSpec) field.ErrorList {
	if spec.Actuator.Name != schemas.KubernetesActuator || spec.Actuator.Target != nil || !spec.Worker.Runs() {
		return nil
	}
	cl, _, err := m.bus.ClusterFor(ctx, spec.Actuator.Cluster)
	if err != nil || cl == nil {
		return nil // an unknown cluster is checkPlugins' to report
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(cl.Config))
	if err != nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil
	}
	ns := spec.Actuator.Namespace
	if ns == "" {
		ns = "default"
	}
	qctx, cancel := context.WithTimeout(ctx, quotaTimeout)
	defer cancel()
	quotas, err := cs.CoreV1().ResourceQuotas(ns).List(qctx, metav1.ListOptions{})
	if err != nil {
		m.log.Debug("quotas not checked", "cluster", cl.Name, "namespace", ns, "err", err)
		return nil
	}
	room, why := podRoom(quotas.Items, spec.Worker.Resources)
	if room < 0 || spec.Replicas.Max <= room {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "replicas", "max"), spec.Replicas.Max,
		fmt.Sprintf("namespace %s of cluster %s has room for %d more worker pods (%s)", ns, cl.Name, room, why))}
}

// podRoom returns how many more pods with requests res the quotas let in,
// -1 when they set no bound, and the binding quota's words.
func podRoom(quotas []corev1.ResourceQuota, res *schemas.Resources) (int, string) {
	room, why := -1, ""
	for _, q := range quotas {
		hardAll := q.Status.Hard
		if len(hardAll) == 0 { // not yet seen by the quota controller
			hardAll = q.Spec.Hard
		}
		for name, hard := range hardAll {
			per, ok := perPod(name, res)
			if !ok {
				continue
			}
			free := hard.DeepCopy()
			used := q.Status.Used[name]
			free.Sub(used)
			n := 0
			if free.Sign() > 0 {
				n = int(free.MilliValue() / per.MilliValue())
			}
			if room < 0 || n < room {
				room, why = n, fmt.Sprintf("ResourceQuota %s: %s used %s of %s", q.Name, name, used.String(), hard.String())
			}
		}
	}
	return room, why
}

// perPod is what one worker pod takes of the quota resource name: one pod,
// or its cpu or memory request; false for what it takes none of, or what
// Pace cannot tell (a request the spec does not set).
func perPod(name corev1.ResourceName, res *schemas.Resources) (resource.Quantity, bool) {
	var request string
	switch name {
	case corev1.ResourcePods, "count/pods":
		return resource.MustParse("1"), true
	case corev1.ResourceRequestsCPU, corev1.ResourceCPU:
		request = requestOf(res, "cpu")
	case corev1.ResourceRequestsMemory, corev1.ResourceMemory:
		request = requestOf(res, "memory")
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(request)
	if err != nil || q.Sign() <= 0 {
		return resource.Quantity{}, false
	}
	return q, true
}

func requestOf(res *schemas.Resources, name string) string {
	if res == nil {
		return ""
	}
	if v, ok := res.Requests[name]; ok {
		return v
	}
	return res.Limits[name] // a limit without a request is also the request
}
