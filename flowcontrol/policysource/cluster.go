package policysource

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	flowcontrolapply "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

// FieldManager is the server-side apply manager of the Dangling conditions
// the cluster source writes.
const FieldManager = "pace-gate-proxy"

// Cluster reads a cluster's FlowSchemas and PriorityLevelConfigurations
// (flowcontrol.apiserver.k8s.io/v1) through informers, so the gate in front
// of the cluster classifies as the cluster does, with its objects' UIDs.
// The policy is the cluster's objects alone: what a cluster lacks of the
// mandatory ones the gate imagines, as kube-apiserver does. With WriteStatus,
// each FlowSchema's Dangling condition is written back through the status
// subresource, as kube-apiserver's configuration controller does; only a
// condition whose status or reason differs is written, so a kube-apiserver
// writing the same conditions is not fought over.
type Cluster struct {
	Client      kubernetes.Interface
	WriteStatus bool
	// SyncTimeout bounds the first read of the cluster; default 30 s.
	SyncTimeout time.Duration
	Log         *slog.Logger
	// Clock stamps the conditions' lastTransitionTime; default the real clock.
	Clock clock.PassiveClock
}

// Run implements Source.
func (c *Cluster) Run(ctx context.Context, apply Apply) error {
	f := informers.NewSharedInformerFactory(c.Client, 0)
	schemas, levels := f.Flowcontrol().V1().FlowSchemas(), f.Flowcontrol().V1().PriorityLevelConfigurations()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default: // a reload is already due
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{schemas.Informer(), levels.Informer()} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	ictx, stop := context.WithCancel(ctx)
	f.Start(ictx.Done())
	defer f.Shutdown() // after stop: it waits for the informers to end
	defer stop()
	timeout := c.SyncTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), schemas.Informer().HasSynced, levels.Informer().HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("FlowSchemas and PriorityLevelConfigurations not read from the cluster within %s: is it reachable, and may this identity list and watch them?", timeout)
	}
	for {
		fss, err := schemas.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		pls, err := levels.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		var objs policy.Objects
		for _, fs := range fss {
			objs.FlowSchemas = append(objs.FlowSchemas, fs.DeepCopy())
		}
		for _, pl := range pls {
			objs.PriorityLevels = append(objs.PriorityLevels, pl.DeepCopy())
		}
		if err := apply(ctx, objs); err != nil {
			c.log().Warn("cluster's flowcontrol objects not applied", "err", err)
		}
		if c.WriteStatus {
			c.writeDangling(ctx, fss, pls)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func (c *Cluster) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// writeDangling writes the Dangling condition of each FlowSchema whose
// condition's status or reason is not what its priority level's presence
// says. A failed write is logged; the next change of either kind retries it.
func (c *Cluster) writeDangling(ctx context.Context, fss []*flowcontrolv1.FlowSchema, pls []*flowcontrolv1.PriorityLevelConfiguration) {
	exists := make(map[string]bool, len(pls))
	for _, pl := range pls {
		exists[pl.Name] = true
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if c.Clock != nil {
		clk = c.Clock
	}
	for _, fs := range fss {
		want := Dangling(fs, exists[fs.Spec.PriorityLevelConfiguration.Name])
		if cur := condition(fs); cur != nil && cur.Status == want.Status && cur.Reason == want.Reason {
			continue
		}
		cond := flowcontrolapply.FlowSchemaCondition().WithType(want.Type).WithStatus(want.Status).
			WithReason(want.Reason).WithMessage(want.Message).WithLastTransitionTime(metav1.NewTime(clk.Now()))
		ac := flowcontrolapply.FlowSchema(fs.Name).WithStatus(flowcontrolapply.FlowSchemaStatus().WithConditions(cond))
		if _, err := c.Client.FlowcontrolV1().FlowSchemas().ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			c.log().Warn("Dangling condition not written", "flow_schema", fs.Name, "err", err)
			continue
		}
		c.log().Info("Dangling condition written", "flow_schema", fs.Name, "status", want.Status, "reason", want.Reason)
	}
}

// Dangling is the Dangling condition of fs, whose priority level exists or
// not (status True, reason NotFound: its requests are not served by it).
func Dangling(fs *flowcontrolv1.FlowSchema, levelExists bool) flowcontrolv1.FlowSchemaCondition {
	pl := fs.Spec.PriorityLevelConfiguration.Name
	if levelExists {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse,
			Reason: "Found", Message: fmt.Sprintf("priority level %q exists", pl)}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue,
		Reason: "NotFound", Message: fmt.Sprintf("priority level %q does not exist: this schema's requests are classified by the next matching schema", pl)}
}

// condition returns fs's Dangling condition, or nil.
func condition(fs *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchemaCondition {
	for i := range fs.Status.Conditions {
		if fs.Status.Conditions[i].Type == flowcontrolv1.FlowSchemaConditionDangling {
			return &fs.Status.Conditions[i]
		}
	}
	return nil
}
