package apf

import (
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// DebugPrefix is where DebugHandler is mounted, as in kube-apiserver.
const DebugPrefix = "/debug/api_priority_and_fairness/"

// DebugHandler serves kube-apiserver's text dumps:
// dump_priority_levels, dump_queues and dump_requests (?includeRequestDetails=1),
// with the same columns.
func (g *Gate) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(DebugPrefix+"dump_priority_levels", g.dumpPriorityLevels)
	mux.HandleFunc(DebugPrefix+"dump_queues", g.dumpQueues)
	mux.HandleFunc(DebugPrefix+"dump_requests", g.dumpRequests)
	return mux
}

func table(w http.ResponseWriter, header ...string) *tabwriter.Writer {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	tw := tabwriter.NewWriter(w, 1, 8, 1, ' ', 0)
	row(tw, header...)
	return tw
}

func row(tw *tabwriter.Writer, cols ...string) { _, _ = fmt.Fprintln(tw, strings.Join(cols, ",\t")) }

func (g *Gate) dumpPriorityLevels(w http.ResponseWriter, _ *http.Request) {
	tw := table(w, "PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests",
		"DispatchedRequests", "RejectedRequests", "TimedoutRequests", "CancelledRequests")
	for _, l := range g.Dump() {
		qs := l.QueueSet
		active := 0
		for _, q := range qs.Queues {
			if len(q.Waiting) > 0 || len(q.Executing) > 0 {
				active++
			}
		}
		row(tw, l.Name, fmt.Sprint(active), fmt.Sprint(qs.Waiting == 0 && qs.Executing == 0), "false", fmt.Sprint(qs.Waiting),
			fmt.Sprint(qs.Executing), fmt.Sprint(qs.Dispatched), fmt.Sprint(qs.Rejected), fmt.Sprint(qs.TimedOut), "0")
	}
	_ = tw.Flush()
}

func (g *Gate) dumpQueues(w http.ResponseWriter, _ *http.Request) {
	tw := table(w, "PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum")
	for _, l := range g.Dump() {
		for _, q := range l.QueueSet.Queues {
			row(tw, l.Name, fmt.Sprint(q.Index), fmt.Sprint(len(q.Waiting)), fmt.Sprint(len(q.Executing)), fmt.Sprint(q.SeatsInUse),
				q.NextDispatchR.String(), fmt.Sprint(q.InitialSeatsSum), fmt.Sprint(q.MaxSeatsSum), q.TotalWorkSum.String())
		}
	}
	_ = tw.Flush()
}

func (g *Gate) dumpRequests(w http.ResponseWriter, r *http.Request) {
	details := r.URL.Query().Get("includeRequestDetails") == "1"
	header := []string{"PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher", "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime"}
	if details {
		header = append(header, "UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource")
	}
	tw := table(w, header...)
	for _, l := range g.Dump() {
		for _, q := range l.QueueSet.Queues {
			for i, rq := range q.Waiting {
				row(tw, l.Name, rq.FlowSchema, fmt.Sprint(q.Index), fmt.Sprint(i), rq.Label, rq.ArrivalTime.UTC().Format(time.RFC3339Nano),
					fmt.Sprint(rq.Estimate.InitialSeats), fmt.Sprint(rq.Estimate.FinalSeats), rq.Estimate.AdditionalLatency.String(), "")
			}
			for _, rq := range q.Executing {
				row(tw, l.Name, rq.FlowSchema, fmt.Sprint(q.Index), "-1", rq.Label, rq.ArrivalTime.UTC().Format(time.RFC3339Nano),
					fmt.Sprint(rq.Estimate.InitialSeats), fmt.Sprint(rq.Estimate.FinalSeats), rq.Estimate.AdditionalLatency.String(),
					rq.StartTime.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	_ = tw.Flush()
}
