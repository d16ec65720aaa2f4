package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// stuckReasons are the reasons a container waits for that do not heal by
// themselves: a missing or unreadable image, a bad pod spec, a worker that
// crashes as soon as it starts.
var stuckReasons = []string{"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CrashLoopBackOff",
	"CreateContainerConfigError", "CreateContainerError"}

// Jobs is what the pod watch reads and does: the jobs' records, the
// presence of the replicas it sees running, and the manager's failing of a
// job (pace.control.fail).
type Jobs interface {
	List(ctx context.Context) ([]*schemas.JobRecord, error)
	AnnounceReplica(ctx context.Context, job, replica string, since time.Time) error
	Fail(ctx context.Context, job, reason string) error
}

// OnBus is the pod watch's Jobs on the bus: the records and failing of c's
// jobs role, and c's replica presence.
func OnBus(c *bus.Client) Jobs { return onBus{c.Jobs(), c} }

type onBus struct {
	bus.Jobs
	c *bus.Client
}

func (o onBus) AnnounceReplica(ctx context.Context, job, replica string, since time.Time) error {
	return o.c.Workers().AnnounceReplica(ctx, job, replica, since)
}

// PodWatch looks at the pods of the Kubernetes Jobs the runtime runs. Each
// running pod is a replica of its job: it announces the pod's presence, so
// that the collector counts it whether or not its worker has started, as
// Asperathos counted replicas; with an Output, it follows the worker
// container's log of each running pod into the job's log. And it applies the pods rule of the jobs'
// failure policies: a job whose Kubernetes Job has failed (its Failed
// condition), or all of whose pods have been stuck (a container waiting in
// ImagePullBackOff, ErrImagePull, CrashLoopBackOff, … or a pod the
// scheduler cannot place) for longer than the policy's grace, is failed,
// with the cause, the pod's message and its workers' last lines as its
// reason.
type PodWatch struct {
	on    func(context.Context, *schemas.JobRecord) (*Runtime, error) // the runtime of a job's cluster
	jobs  Jobs
	out   Output   // nil: the pods' logs are not followed
	logs  *podLogs // with out
	clk   clock.PassiveClock
	every time.Duration
	log   *slog.Logger
	since map[string]time.Time // jobs found stuck, since when
	// exited takes each pod whose worker failed (ReportExits); failed
	// holds the pods already reported, by namespace/name.
	exited func(job, replica string, cause error)
	failed map[string]bool
}

// ReportExits makes the watch hand each pod whose worker failed (phase
// Failed, not by a disruption) to exited once, after delivering its
// container's log to the Output: targets.Crashes.Exited applies the
// before_first_result rule to it, as it does to local workers' exits.
func (w *PodWatch) ReportExits(exited func(job, replica string, cause error)) *PodWatch {
	w.exited = exited
	return w
}

// Watch returns the runtime's pod watch, looking every `every` (at most the
// 5 s within which a worker refreshes its presence) and following the pods'
// logs into out (nil: not followed).
func (r *Runtime) Watch(jobs Jobs, out Output, every time.Duration, clk clock.PassiveClock) *PodWatch {
	return newPodWatch(func(context.Context, *schemas.JobRecord) (*Runtime, error) { return r, nil }, jobs, out, every, clk, r.log)
}

// Watch returns the pod watch of the jobs of every cluster, looking every
// `every` and following the pods' logs into out (nil: not followed).
func (c *Clusters) Watch(jobs Jobs, out Output, every time.Duration, clk clock.PassiveClock) *PodWatch {
	return newPodWatch(c.runtime, jobs, out, every, clk, c.log)
}

func newPodWatch(on func(context.Context, *schemas.JobRecord) (*Runtime, error), jobs Jobs, out Output, every time.Duration,
	clk clock.PassiveClock, log *slog.Logger) *PodWatch {
	w := &PodWatch{on: on, jobs: jobs, out: out, clk: clk, every: every, log: log.With("rule", schemas.RulePods),
		since: map[string]time.Time{}, failed: map[string]bool{}}
	if out != nil {
		w.logs = newPodLogs(out, clk.Now())
	}
	return w
}

// Run checks every `every` until ctx ends, then stops following the pods'
// logs.
func (w *PodWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("pod check failed", "err", err)
		}
	}
}

// Stop stops following the pods' logs, and waits for their streams to end.
func (w *PodWatch) Stop() {
	if w.logs != nil {
		w.logs.stop()
	}
}

// Check looks once at the pods of every ongoing job the runtime runs: it
// follows the logs of the running ones (each for as long as ctx lives, or
// until its pod is gone at a later check), and fails the jobs with the rule
// on that break it. A job that cannot be checked (its cluster unreachable)
// does not stop the others: the errors are returned together.
func (w *PodWatch) Check(ctx context.Context) error {
	recs, err := w.jobs.List(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	pods := map[string]bool{} // the failed pods still there
	var errs []error
	for _, rec := range recs {
		if rec.State != schemas.Ongoing || rec.Spec.Actuator.Name != schemas.KubernetesActuator || rec.Spec.Actuator.Target != nil {
			continue
		}
		cause, now, err := w.look(ctx, rec, pods)
		if err != nil {
			errs = append(errs, err) // the other jobs are still checked
			continue
		}
		if !rec.Spec.Failure.On(schemas.RulePods) {
			continue
		}
		seen[rec.ID] = true
		if cause == "" {
			delete(w.since, rec.ID)
			continue
		}
		first, ok := w.since[rec.ID]
		if !ok {
			first = w.clk.Now()
			w.since[rec.ID] = first
		}
		grace := rec.Spec.Failure.Pods.D()
		if !now && w.clk.Since(first) < grace {
			continue
		}
		reason := "failure policy pods: " + cause
		if !now {
			reason = fmt.Sprintf("failure policy pods: for %s, %s", w.clk.Since(first).Round(time.Second), cause)
		}
		if w.out != nil {
			if tail := w.out.Tail(rec.ID); len(tail) > 0 {
				reason += "; its workers' last lines: " + strings.Join(tail, " | ")
			}
		}
		if err := w.jobs.Fail(ctx, rec.ID, reason); err != nil {
			w.log.Warn("job not failed by its failure policy; asked again at the next check", "job", rec.ID, "err", err)
			continue
		}
		w.log.Info("job failed by its failure policy", "job", rec.ID, "reason", reason)
		delete(w.since, rec.ID)
	}
	for job := range w.since {
		if !seen[job] {
			delete(w.since, job)
		}
	}
	if len(errs) == 0 {
		for key := range w.failed {
			if !pods[key] {
				delete(w.failed, key)
			}
		}
	}
	if w.logs != nil {
		w.logs.sweep()
	}
	return errors.Join(errs...)
}

// look announces rec's running pods, reports its failed ones (adding them to
// failed), and says why its workers cannot work, "" when nothing says so;
// now marks a cause that needs no grace (the Kubernetes Job has failed).
func (w *PodWatch) look(ctx context.Context, rec *schemas.JobRecord, failed map[string]bool) (cause string, now bool, err error) {
	rt, err := w.on(ctx, rec)
	if err != nil {
		return "", false, err
	}
	ns, name := namespace(rec), Name(rec.ID)
	job, err := rt.cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err): // not created yet, or scaled to 0 before it was
	case err != nil:
		return "", false, fmt.Errorf("job %s/%s: %w", ns, name, err)
	default:
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return fmt.Sprintf("its Kubernetes Job %s/%s failed: %s: %s", ns, name, c.Reason, c.Message), true, nil
			}
		}
	}
	pods, err := rt.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelJob + "=" + rec.ID})
	if err != nil {
		return "", false, fmt.Errorf("pods of %s: %w", rec.ID, err)
	}
	stuck := true // until a pod that may work is found
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if exit := workerExit(&p); exit != nil && w.exited != nil {
			key := p.Namespace + "/" + p.Name
			failed[key] = true
			if !w.failed[key] {
				w.failed[key] = true
				if w.logs != nil {
					w.logs.drain(ctx, rt, rec.ID, &p)
				}
				w.exited(rec.ID, p.Name, exit)
			}
			continue
		}
		if p.Status.Phase == corev1.PodRunning {
			since := p.CreationTimestamp.Time
			if p.Status.StartTime != nil {
				since = p.Status.StartTime.Time
			}
			if err := w.jobs.AnnounceReplica(ctx, rec.ID, p.Name, since); err != nil {
				w.log.Warn("pod presence not announced", "job", rec.ID, "pod", p.Name, "err", err)
			}
			if w.logs != nil {
				w.logs.follow(ctx, rt, rec.ID, &p)
			}
		}
		if c := podStuck(&p); c == "" {
			stuck = false // one pod that may work is enough
		} else {
			cause = c
		}
	}
	if !stuck {
		cause = ""
	}
	return cause, false, nil
}

// workerExit says how p's worker failed, nil when p has not failed or was
// stopped by a disruption (preemption, eviction, a node going away).
func workerExit(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodFailed {
		return nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; s.Name == WorkerContainer && t != nil {
			return fmt.Errorf("pod %s: container %s exited %d (%s)", p.Name, s.Name, t.ExitCode, cmp.Or(strings.TrimSpace(t.Message), t.Reason))
		}
	}
	return fmt.Errorf("pod %s failed: %s", p.Name, cmp.Or(strings.TrimSpace(p.Status.Message), p.Status.Reason))
}

// podStuck says why p cannot work, "" when nothing says so.
func podStuck(p *corev1.Pod) string {
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if wt := s.State.Waiting; wt != nil && slices.Contains(stuckReasons, wt.Reason) {
			return fmt.Sprintf("pod %s: container %s is in %s: %s", p.Name, s.Name, wt.Reason, strings.TrimSpace(wt.Message))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("pod %s is unschedulable: %s", p.Name, strings.TrimSpace(c.Message))
		}
	}
	return ""
}
