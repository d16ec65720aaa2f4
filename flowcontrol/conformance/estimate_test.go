package conformance

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/work"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	kube "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// resourceStats is the object-count source both estimators read. A nil entry
// is stale; a missing one is unknown.
var resourceStats = map[string]*storage.Stats{
	"pods":       {ObjectCount: 799, EstimatedAverageObjectSizeBytes: 10_000},
	"events":     {ObjectCount: 699, EstimatedAverageObjectSizeBytes: 10_000},
	"configmaps": {ObjectCount: 69, EstimatedAverageObjectSizeBytes: 200_000},
	"secrets":    {ObjectCount: 100_000, EstimatedAverageObjectSizeBytes: 1_000},
	"leases":     {ObjectCount: 0, EstimatedAverageObjectSizeBytes: 0},
	"nodes":      {ObjectCount: 12, EstimatedAverageObjectSizeBytes: 0},
	"stale":      nil,
}

type paceObjects struct{}

func (paceObjects) ObjectStats(group, resource string) (work.Stats, error) {
	s, ok := resourceStats[resource]
	switch {
	case !ok:
		return work.Stats{}, work.ErrObjectCountNotFound
	case s == nil:
		return work.Stats{}, work.ErrObjectCountStale
	}
	return work.Stats{ObjectCount: s.ObjectCount, AverageObjectSizeBytes: s.EstimatedAverageObjectSizeBytes}, nil
}

func kubeObjects(key string) (storage.Stats, error) {
	// kube keys are group/resource strings; the groups used here are empty or "apps"
	resource := key
	if i := len(key) - len(".apps"); i > 0 && key[i:] == ".apps" {
		resource = key[:i]
	}
	s, ok := resourceStats[resource]
	switch {
	case !ok:
		return storage.Stats{}, kube.ObjectCountNotFoundErr
	case s == nil:
		return storage.Stats{}, kube.ObjectCountStaleErr
	}
	return *s, nil
}

func watchCount(resource, namespace, name string) int {
	return len(resource)*7 + len(namespace)*13 + len(name)*29
}

type paceWatches struct{}

func (paceWatches) WatchCount(r *work.Request) int {
	return watchCount(r.Resource, r.Namespace, r.Name)
}

func randomRequest(rng *rand.Rand) work.Request {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	r := work.Request{
		Verb:                 pick("get", "list", "list", "watch", "watch", "create", "update", "patch", "delete", "deletecollection"),
		APIGroup:             pick("", "apps"),
		Resource:             pick("pods", "events", "configmaps", "secrets", "leases", "nodes", "stale", "widgets", "serviceaccounts"),
		Namespace:            pick("", "default", "kube-system"),
		Name:                 pick("", "", "", "x", "a-much-longer-name"),
		ResourceVersion:      pick("", "0", "1", "12345"),
		ResourceVersionMatch: pick("", "", "NotOlderThan", "Exact"),
		Continue:             pick("", "", "", "token"),
		LabelSelector:        pick("", "", "app=x"),
		FieldSelector:        pick("", "", "metadata.name=x"),
	}
	if r.Resource == "serviceaccounts" && rng.IntN(2) == 0 {
		r.Subresource = "token"
	}
	if rng.IntN(2) == 0 {
		r.Limit = int64(rng.IntN(1000))
	}
	if b := rng.IntN(3); b > 0 {
		v := b == 1
		r.SendInitialEvents = &v
	}
	return r
}

func toHTTP(r work.Request) *http.Request {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("resourceVersion", r.ResourceVersion)
	set("resourceVersionMatch", r.ResourceVersionMatch)
	set("continue", r.Continue)
	set("labelSelector", r.LabelSelector)
	set("fieldSelector", r.FieldSelector)
	if r.Limit > 0 {
		q.Set("limit", strconv.FormatInt(r.Limit, 10))
	}
	if r.SendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*r.SendInitialEvents))
	}
	info := &apirequest.RequestInfo{IsResourceRequest: true, Verb: r.Verb, APIGroup: r.APIGroup, Resource: r.Resource,
		Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name}
	ctx := apirequest.WithRequestInfo(context.Background(), info)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/apis?"+q.Encode(), nil)
	if err != nil {
		panic(err)
	}
	return req
}

// withoutEtcd is Pace's default estimator configuration as kube's runs in
// this process, where no etcd says that it answers watch progress requests:
// lists without resourceVersion are read from storage, not from the cache.
func withoutEtcd() work.EstimatorConfig {
	cfg := work.DefaultEstimatorConfig()
	cfg.ConsistentReadFromCache = false
	return cfg
}

// TestWorkEstimatesMatchKube compares 20,000 random requests (every verb,
// list option, stale and unknown counts, watch counts and per-level caps)
// with kube's estimator at its default configuration and feature gates.
func TestWorkEstimatesMatchKube(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 3))
	caps := map[string]int{"pl-none": 0, "pl-small": 4, "pl-mid": 37, "pl-big": 200}
	paceEst := work.NewEstimator(withoutEtcd(), paceObjects{}, paceWatches{}, func(pl string) int { return caps[pl] })
	kubeEst := kube.NewWorkEstimator(kubeObjects,
		func(ri *apirequest.RequestInfo) int { return watchCount(ri.Resource, ri.Namespace, ri.Name) },
		kube.DefaultWorkEstimatorConfig(), func(pl string) uint64 { return uint64(caps[pl]) })
	levels := []string{"pl-none", "pl-small", "pl-mid", "pl-big"}
	seen := map[work.Estimate]bool{}
	for i := range 20_000 {
		r := randomRequest(rng)
		pl := levels[rng.IntN(len(levels))]
		got := paceEst.Estimate(&r, pl)
		k := kubeEst(toHTTP(r), "fs", pl)
		want := work.Estimate{InitialSeats: int(k.InitialSeats), FinalSeats: int(k.FinalSeats), AdditionalLatency: k.AdditionalLatency}
		if got != want {
			t.Fatalf("request %d %+v at %s: pace %+v, kube %+v", i, r, pl, got, want)
		}
		seen[got] = true
	}
	if len(seen) < 20 {
		t.Errorf("only %d distinct estimates compared; the generator is too narrow", len(seen))
	}
	t.Logf("%d distinct estimates compared", len(seen))
	noInfo := kubeEst(&http.Request{URL: &url.URL{}}, "fs", "pl-mid")
	if got := paceEst.Estimate(nil, "pl-mid"); got.InitialSeats != int(noInfo.InitialSeats) {
		t.Errorf("request without attributes: pace %+v, kube %+v", got, noInfo)
	}
}
