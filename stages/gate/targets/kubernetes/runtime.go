package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// Labels on every object Pace creates.
const (
	LabelJob       = "pace.dev/job"
	LabelManagedBy = "app.kubernetes.io/managed-by"
)

// Runtime scales jobs' workers as batch/v1 Jobs. It is safe for concurrent use.
type Runtime struct {
	cs    kubernetes.Interface
	cfg   Config
	log   *slog.Logger
	retry func() backoff.BackOff

	mu      sync.Mutex
	metered map[string]string // jobs with a cost → namespace; guarded by mu
}

// New returns a runtime using cs. It fails when cfg does not validate.
func New(cs kubernetes.Interface, cfg Config, opts ...Option) (*Runtime, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes runtime: %w", errs.ToAggregate())
	}
	return &Runtime{cs: cs, cfg: cfg, log: logger(opts).With("runtime", "kubernetes"), metered: map[string]string{}, retry: func() backoff.BackOff {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 30*time.Second
		return b
	}}, nil
}

// Name is the name of the job's Kubernetes Job.
func Name(job string) string { return "pace-" + job }

func namespace(rec *schemas.JobRecord) string {
	if ns := rec.Spec.Actuator.Namespace; ns != "" {
		return ns
	}
	return "default"
}

// Scale sets the parallelism of the job's Kubernetes Job, creating it on the
// first call, and returns the replica count asked for.
func (r *Runtime) Scale(ctx context.Context, rec *schemas.JobRecord, replicas int) (int, error) {
	if t := rec.Spec.Actuator.Target; t != nil {
		return replicas, r.scaleTarget(ctx, rec, t, replicas)
	}
	ns, name := namespace(rec), Name(rec.ID)
	patch := fmt.Appendf(nil, `{"spec":{"parallelism":%d}}`, replicas)
	err := r.do(ctx, func(ctx context.Context) error {
		_, err := r.cs.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			if replicas == 0 {
				return nil // nothing to scale down
			}
			job, err := r.job(rec, replicas)
			if err != nil {
				return err
			}
			_, err = r.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			return err
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("scale %s/%s to %d: %w", ns, name, replicas, err)
	}
	r.log.Info("job scaled", "job", rec.ID, "namespace", ns, "parallelism", replicas)
	r.meter(rec, replicas)
	return replicas, nil
}

// Terminate deletes the job's Kubernetes Job and, in the foreground, its pods.
func (r *Runtime) Terminate(ctx context.Context, rec *schemas.JobRecord) error {
	if t := rec.Spec.Actuator.Target; t != nil { // the user's workload: scaled to nothing, kept
		return r.scaleTarget(ctx, rec, t, 0)
	}
	ns, name := namespace(rec), Name(rec.ID)
	fg := metav1.DeletePropagationForeground
	err := r.do(ctx, func(ctx context.Context) error {
		err := r.cs.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", ns, name, err)
	}
	r.log.Info("job deleted", "job", rec.ID, "namespace", ns)
	r.meter(rec, 0)
	return nil
}

// Running returns the number of running pods of the job.
func (r *Runtime) Running(ctx context.Context, rec *schemas.JobRecord) (int, error) {
	if t := rec.Spec.Actuator.Target; t != nil {
		s, err := r.getScale(ctx, namespace(rec), t)
		if err != nil {
			return 0, err
		}
		return int(s.Status.Replicas), nil
	}
	pods, err := r.cs.CoreV1().Pods(namespace(rec)).List(ctx, metav1.ListOptions{LabelSelector: LabelJob + "=" + rec.ID})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// attemptTimeout bounds one API call, so that a request the network
// swallowed is retried instead of awaited until the gate gives up on it.
const attemptTimeout = 15 * time.Second

// do runs op until it succeeds, fails for good, or the backoff gives up,
// each attempt within attemptTimeout. It retries throttling, conflicts,
// server errors, timeouts and broken connections, waiting at least the
// server's Retry-After (client-go already waits it out for its own ten
// retries of 429 and 5xx answers that carry one), and notes each retry in
// ctx (targets.NoteRetry) for the request's outcome.
func (r *Runtime) do(ctx context.Context, op func(ctx context.Context) error) error {
	b := r.retry()
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := op(actx)
		cancel()
		cause := retryCause(ctx, err)
		if cause == "" {
			return err
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return err
		}
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			wait = max(wait, time.Duration(s)*time.Second)
		}
		targets.NoteRetry(ctx, cause)
		r.log.Debug("retrying", "cause", cause, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// retryCause names why a failed call may succeed if repeated, or returns ""
// when err is nil or final (or ctx has ended). A write whose response was
// lost is safe to repeat: Scale patches an absolute parallelism and turns
// AlreadyExists (its own earlier create) into a patch, and Terminate takes
// NotFound as done.
func retryCause(ctx context.Context, err error) string {
	if err == nil || ctx.Err() != nil {
		return ""
	}
	switch {
	case apierrors.IsTooManyRequests(err):
		return "throttled"
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsAlreadyExists(err):
		return "already exists"
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return "server timeout"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if status.Status().Code >= 500 {
			return "server error"
		}
		return ""
	}
	var ue *url.Error
	switch {
	case errors.As(err, &ue) && ue.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case ue != nil:
		return "connection"
	}
	return ""
}

// ErrNoImage is returned by Scale for a job without a worker image.
var ErrNoImage = errors.New("the kubernetes actuator needs worker.image")
