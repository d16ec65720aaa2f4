package apfhttp

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/queueset"
)

// DebugPrefix is where DebugHandler is mounted, as in kube-apiserver.
const DebugPrefix = "/debug/api_priority_and_fairness/"

// DebugHandler serves kube-apiserver's text dumps, dump_priority_levels,
// dump_queues and dump_requests, with the same columns.
func DebugHandler(g *apf.Gate) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(DebugPrefix+"dump_priority_levels", func(w http.ResponseWriter, _ *http.Request) { dumpPriorityLevels(w, g) })
	mux.HandleFunc(DebugPrefix+"dump_queues", func(w http.ResponseWriter, _ *http.Request) { dumpQueues(w, g) })
	mux.HandleFunc(DebugPrefix+"dump_requests", func(w http.ResponseWriter, _ *http.Request) { dumpRequests(w, g) })
	return mux
}

func table(w http.ResponseWriter, header ...string) *tabwriter.Writer {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	tw := tabwriter.NewWriter(w, 8, 0, 1, ' ', 0) // kube-apiserver's widths
	row(tw, header...)
	return tw
}

func row(tw *tabwriter.Writer, cols ...string) { _, _ = fmt.Fprintln(tw, strings.Join(cols, ",\t")) }

// dumpPriorityLevels prints one row per level, sorted by name as kube does.
// A request withdrawn from its queue when its wait ended is counted, as
// kube-apiserver (v0.37) counts it, as cancelled; kube never counts a
// request as timed out there, so TimedoutRequests is 0.
func dumpPriorityLevels(w http.ResponseWriter, g *apf.Gate) {
	tw := table(w, "PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests",
		"DispatchedRequests", "RejectedRequests", "TimedoutRequests", "CancelledRequests")
	levels := g.Dump()
	slices.SortFunc(levels, func(a, b flowcontrol.LevelDump) int { return strings.Compare(a.Name, b.Name) })
	for _, l := range levels {
		qs := l.QueueSet
		active := 0 // queues with requests waiting, as kube counts them
		for _, q := range qs.Queues {
			if len(q.Waiting) > 0 {
				active++
			}
		}
		row(tw, l.Name, fmt.Sprint(active), fmt.Sprint(qs.Waiting == 0 && qs.Executing == 0), fmt.Sprint(l.Lingering),
			fmt.Sprint(qs.Waiting), fmt.Sprint(qs.Executing), fmt.Sprint(qs.Dispatched), fmt.Sprint(qs.Rejected), "0",
			fmt.Sprint(qs.TimedOut))
	}
	_ = tw.Flush()
}

func dumpQueues(w http.ResponseWriter, g *apf.Gate) {
	tw := table(w, "PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum")
	for _, l := range g.Dump() {
		for _, q := range l.QueueSet.Queues {
			row(tw, l.Name, fmt.Sprint(q.Index), fmt.Sprint(len(q.Waiting)), fmt.Sprint(len(q.Executing)), fmt.Sprint(q.SeatsInUse),
				q.NextDispatchR.String(), fmt.Sprint(q.InitialSeatsSum), fmt.Sprint(q.MaxSeatsSum), q.TotalWorkSum.String())
		}
	}
	_ = tw.Flush()
}

// dumpRequests prints the requests waiting and executing, as kube does, with
// -1 for the queue of requests executing without one (exempt levels). It
// ignores includeRequestDetails: Pace's requests do not keep the user and
// request attributes kube prints there (docs/flowcontrol.md, deviation 8).
func dumpRequests(w http.ResponseWriter, g *apf.Gate) {
	tw := table(w, "PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher", "ArriveTime",
		"InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime")
	request := func(level string, queue, index int, rq queueset.RequestDump) {
		row(tw, level, rq.FlowSchema, fmt.Sprint(queue), fmt.Sprint(index), rq.Label, rq.ArrivalTime.UTC().Format(time.RFC3339Nano),
			fmt.Sprint(rq.Estimate.InitialSeats), fmt.Sprint(rq.Estimate.FinalSeats), rq.Estimate.AdditionalLatency.String(),
			rq.StartTime.UTC().Format(time.RFC3339Nano))
	}
	for _, l := range g.Dump() {
		for _, q := range l.QueueSet.Queues {
			for i, rq := range q.Waiting {
				request(l.Name, q.Index, i, rq)
			}
			for _, rq := range q.Executing {
				request(l.Name, q.Index, -1, rq)
			}
		}
		for _, rq := range l.QueueSet.QueuelessExecuting {
			request(l.Name, -1, -1, rq)
		}
	}
	_ = tw.Flush()
}
