package kubernetes

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pace-platform/pace/internal/lines"
)

// WorkerContainer is the name of the container that runs a job's worker in
// each of its pods.
const WorkerContainer = "worker"

// Output takes the lines that the workers of a job write and remembers the
// last ones (targets.WorkerLog).
type Output interface {
	Line(job, worker, line string)
	Tail(job string) []string
}

// podLogs follows the worker container's log of each running pod of the
// jobs a PodWatch looks at, and hands each line to an Output tagged with the
// pod's name. A stream that ends (the container exited, the connection
// broke, or the node serves the log only up to its end) is opened again at
// the next look while the pod runs, from the last line's timestamp: the
// lines are asked for with their timestamps, and those not after the last
// one delivered are skipped, so a line is delivered once. A pod first seen
// is followed from when the watch started, so that a gate that restarts
// does not repeat what its predecessor delivered.
type podLogs struct {
	out   Output
	start time.Time
	wg    sync.WaitGroup

	mu   sync.Mutex
	pods map[string]*podLog // by namespace/name
}

type podLog struct {
	job    string
	last   time.Time // timestamp of the last line delivered
	open   bool      // a stream is being read
	cancel context.CancelFunc
	seen   bool // running at the last look
}

func newPodLogs(out Output, start time.Time) *podLogs {
	return &podLogs{out: out, start: start, pods: map[string]*podLog{}}
}

// follow makes sure that the running pod p of job is followed, opening a
// stream that lives at most as long as ctx.
func (l *podLogs) follow(ctx context.Context, rt *Runtime, job string, p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.pods[key]
	if pl == nil {
		pl = &podLog{job: job, last: l.start}
		l.pods[key] = pl
	}
	pl.seen = true
	if pl.open {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	pl.open, pl.cancel = true, cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cancel()
		err := l.read(ctx, rt, p.Namespace, p.Name, pl, true)
		if err != nil && ctx.Err() == nil {
			rt.log.Debug("pod log stream ended", "job", job, "pod", p.Name, "err", err)
		}
		l.mu.Lock()
		pl.open = false
		l.mu.Unlock()
	}()
}

// drain delivers what is left of the log of p, a pod whose worker has
// exited, before it returns: the lines of a worker that failed at once,
// never seen running, reach the job's log too.
func (l *podLogs) drain(ctx context.Context, rt *Runtime, job string, p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	l.mu.Lock()
	pl := l.pods[key]
	if pl == nil {
		pl = &podLog{job: job, last: l.start}
		l.pods[key] = pl
	}
	pl.seen = true
	l.mu.Unlock()
	if err := l.read(ctx, rt, p.Namespace, p.Name, pl, false); err != nil && ctx.Err() == nil {
		rt.log.Debug("pod log not read", "job", job, "pod", p.Name, "err", err)
	}
}

// read streams one pod's log until it ends (follow), or reads it as far as
// it goes.
func (l *podLogs) read(ctx context.Context, rt *Runtime, ns, pod string, pl *podLog, follow bool) error {
	l.mu.Lock()
	since := metav1.NewTime(pl.last)
	l.mu.Unlock()
	rc, err := rt.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: WorkerContainer,
		Follow: follow, Timestamps: true, SinceTime: &since}).Stream(ctx)
	if err != nil {
		return err
	}
	defer rc.Close() //nolint:errcheck // read only
	w := &lines.Writer{Emit: func(line string) {
		stamp, text, _ := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil { // no timestamp: deliver it as it is
			l.out.Line(pl.job, pod, line)
			return
		}
		l.mu.Lock()
		fresh := at.After(pl.last)
		if fresh {
			pl.last = at
		}
		l.mu.Unlock()
		if fresh {
			l.out.Line(pl.job, pod, text)
		}
	}}
	_, err = io.Copy(w, rc)
	_ = w.Close()
	return err
}

// sweep stops following the pods not seen running since the last sweep.
func (l *podLogs) sweep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, pl := range l.pods {
		if !pl.seen {
			if pl.cancel != nil {
				pl.cancel()
			}
			delete(l.pods, key)
			continue
		}
		pl.seen = false
	}
}

// stop stops following every pod and waits for the streams to end.
func (l *podLogs) stop() {
	l.mu.Lock()
	for _, pl := range l.pods {
		if pl.cancel != nil {
			pl.cancel()
		}
	}
	l.mu.Unlock()
	l.wg.Wait()
}
