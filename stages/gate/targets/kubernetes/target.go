package kubernetes

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pace-platform/pace/schemas"
)

// scaleTarget sets the replicas of the job's target (a Deployment or a
// StatefulSet the user runs) through its scale subresource, which needs no
// right on the workload itself.
func (r *Runtime) scaleTarget(ctx context.Context, rec *schemas.JobRecord, t *schemas.ScaleTarget, replicas int) error {
	ns := namespace(rec)
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	err := r.do(ctx, func(ctx context.Context) error {
		var err error
		switch t.Kind {
		case "StatefulSet":
			_, err = r.cs.AppsV1().StatefulSets(ns).Patch(ctx, t.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
		default:
			_, err = r.cs.AppsV1().Deployments(ns).Patch(ctx, t.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("scale %s %s/%s to %d: %w", t.Kind, ns, t.Name, replicas, err)
	}
	r.log.Info("target scaled", "job", rec.ID, "kind", t.Kind, "namespace", ns, "name", t.Name, "replicas", replicas)
	return nil
}

// getScale reads the target's scale subresource.
func (r *Runtime) getScale(ctx context.Context, ns string, t *schemas.ScaleTarget) (*autoscalingv1.Scale, error) {
	if t.Kind == "StatefulSet" {
		return r.cs.AppsV1().StatefulSets(ns).GetScale(ctx, t.Name, metav1.GetOptions{})
	}
	return r.cs.AppsV1().Deployments(ns).GetScale(ctx, t.Name, metav1.GetOptions{})
}
