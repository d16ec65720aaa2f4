package conformance

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"

	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	kflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	kube "k8s.io/apiserver/pkg/util/flowcontrol/request"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// randomHTTPRequest is a Kubernetes API request with raw list parameters,
// including values that do not parse.
func randomHTTPRequest(rng *rand.Rand) *http.Request {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	path := pick("/api/v1", "/apis/apps/v1") + pick("", "/namespaces/default", "/namespaces/kube-system") +
		"/" + pick("pods", "events", "configmaps", "secrets", "deployments", "stale", "widgets", "serviceaccounts") +
		pick("", "", "/x", "/x/status", "/x/token")
	q := url.Values{}
	for _, k := range []string{"limit", "timeoutSeconds", "sendInitialEvents", "watch", "resourceVersion", "resourceVersionMatch",
		"continue", "labelSelector", "fieldSelector"} {
		if rng.IntN(3) > 0 {
			continue
		}
		switch k {
		case "limit", "timeoutSeconds":
			q.Add(k, pick("0", "20", "500", "abc", ""))
		case "sendInitialEvents", "watch":
			q.Add(k, pick("true", "1", "false", "0", "False", "yes", ""))
		case "resourceVersion":
			q.Add(k, pick("", "0", "1", "123"))
		case "resourceVersionMatch":
			q.Add(k, pick("NotOlderThan", "Exact"))
		case "continue":
			q.Add(k, "token")
		case "labelSelector":
			q.Add(k, pick("app=x", "app in (x"))
		case "fieldSelector":
			q.Add(k, pick("metadata.name=x", "spec.nodeName=n1", "spec.nodeName=", "status.phase=Running"))
		}
	}
	method := pick("GET", "GET", "GET", "POST", "PUT", "PATCH", "DELETE")
	r, err := http.NewRequest(method, path+"?"+q.Encode(), nil)
	if err != nil {
		panic(err)
	}
	return r
}

// TestHTTPWorkEstimatesMatchKube runs 20,000 random HTTP requests through
// Pace's filter path (KubeResolver, WorkRequest, the estimator and the watch
// tracker) and through kube-apiserver's (RequestInfoFactory, its work
// estimator and watch tracker), with every watch among them registered on
// both sides and kept, and requires the same estimates: list options parsed
// the same way (invalid ones charged the maximum), watches counted and
// excluded (spec.nodeName) the same way.
func TestHTTPWorkEstimatesMatchKube(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 7))
	caps := map[string]int{"pl-none": 0, "pl-mid": 37}
	paceWatches := apf.NewWatchTracker()
	kubeWatches := kflowcontrol.NewWatchTracker()
	paceEst := work.NewEstimator(withoutEtcd(), paceObjects{}, paceWatches, func(pl string) int { return caps[pl] })
	kubeEst := kube.NewWorkEstimator(kubeObjects, kubeWatches.GetInterestedWatchCount, kube.DefaultWorkEstimatorConfig(),
		func(pl string) uint64 { return uint64(caps[pl]) })
	seen := map[work.Estimate]bool{}
	watches := 0
	for i := range 20_000 {
		r := randomHTTPRequest(rng)
		kri, err := kubeRequestInfo.NewRequestInfo(r)
		if err != nil {
			t.Fatal(err)
		}
		kr := r.WithContext(apirequest.WithRequestInfo(context.Background(), kri))
		ri := apfhttp.KubeResolver(r)
		wr := apf.WorkRequest(apfhttp.Attributes(r, ri), r.URL.Query())
		pl := []string{"pl-none", "pl-mid"}[rng.IntN(2)]
		got := paceEst.Estimate(wr, pl)
		k := kubeEst(kr, "fs", pl)
		want := work.Estimate{InitialSeats: int(k.InitialSeats), FinalSeats: int(k.FinalSeats), AdditionalLatency: k.AdditionalLatency}
		if got != want {
			t.Fatalf("request %d %s %s at %s: pace %+v, kube %+v", i, r.Method, r.URL, pl, got, want)
		}
		seen[got] = true
		if ri.IsWatch() && rng.IntN(4) > 0 { // most watches start and last
			paceWatches.Register(wr)
			kubeWatches.RegisterWatch(kr)
			watches++
		}
	}
	t.Logf("%d distinct estimates compared, %d watches registered", len(seen), watches)
	if len(seen) < 15 {
		t.Errorf("only %d distinct estimates compared; the generator is too narrow", len(seen))
	}
	finals := 0
	for e := range seen {
		if e.FinalSeats > 0 {
			finals++
		}
	}
	if finals < 3 {
		t.Errorf("only %d distinct estimates with final seats; the watches are too few", finals)
	}
}
