package natsauth

import (
	"strings"

	"github.com/pace-platform/pace/schemas"
)

// StageRights are the NATS rights of one user of Pace's own processes
// (pace-<stage>, and pace-admin): subjects it may publish to, subjects it
// may subscribe to, and whether it may answer the requests it receives.
// Anything not listed is denied.
type StageRights struct {
	Publish, Subscribe []string
	// Responses lets the user answer each request it receives, once
	// (auth.conf's allow_responses).
	Responses bool
}

// StageUsers returns the rights of each user of Pace's own processes, by
// user name, for subject prefix p. It is the one source of those rights:
// pace up gives them to its embedded server, and deploy/nats/auth.conf
// (and its copy under deploy/kubernetes) must grant exactly these, which
// a test of package deploy/nats checks. A stage whose calls need a right
// missing here is refused by the server; the stages' permission tests fail
// on any refusal of a stage user.
func StageUsers(p schemas.Prefix) map[string]StageRights {
	out := make(map[string]StageRights, len(stageRights))
	rewrite := forPrefix(p)
	for user, r := range stageRights {
		out[user] = StageRights{Publish: rewrite(r.Publish), Subscribe: rewrite(r.Subscribe), Responses: r.Responses}
	}
	return out
}

// forPrefix returns what turns subjects of the default prefix (pace.*,
// streams PACE_*, buckets pace_*) into those of p.
func forPrefix(p schemas.Prefix) func([]string) []string {
	if p == schemas.DefaultPrefix {
		return func(s []string) []string { return append([]string(nil), s...) }
	}
	lower, upper := string(p), strings.ToUpper(string(p))
	r := strings.NewReplacer("KV_pace_", "KV_"+lower+"_", "$KV.pace_", "$KV."+lower+"_",
		"$O.pace_", "$O."+lower+"_", "OBJ_pace_", "OBJ_"+lower+"_", ".PACE_", "."+upper+"_")
	return func(subjects []string) []string {
		out := make([]string, len(subjects))
		for i, s := range subjects {
			if rest, ok := strings.CutPrefix(s, "pace."); ok {
				s = lower + "." + rest
			}
			out[i] = r.Replace(s)
		}
		return out
	}
}

// stageRights are the users' rights with the default prefix. The reasons
// for each are auth.conf's comments.
var stageRights = map[string]StageRights{
	"pace-manager": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$KV.pace_flowcontrol.>", "pace.jobs.>", "pace.work.>",
			"pace.logs.>", "pace.dead.>", "pace.metrics.*.dead", "$O.pace_dead_letters.>", "pace.ledger.>", "pace.migration.>",
			"$KV.pace_jobs.>", "$KV.pace_plugins.>", "$KV.pace_clusters.>", "$KV.pace_item_times.>", "$KV.pace_failures.>",
			"$KV.pace_leases.manager", "$KV.pace_leases.work-subjects", "$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.CREATE.*",
			"$JS.API.STREAM.UPDATE.*", "$JS.API.STREAM.DELETE.*", "$JS.API.STREAM.PURGE.*", "$JS.API.STREAM.MSG.GET.*",
			"$JS.API.STREAM.MSG.DELETE.*", "$JS.API.DIRECT.GET.>",
			"$JS.API.CONSUMER.>",
			"$JS.ACK.PACE_ADVISORIES.>", "$JS.ACK.*.ledger.>",
			"$JS.FC.>",
		},
		Subscribe: []string{"pace.submit", "pace.control.*", "pace.reader.>", "pace.flowcontrol.dump", "$SYS.REQ.USER.AUTH",
			"pace.metrics.*.progress", "_INBOX.>"},
		Responses: true,
	},
	"pace-collector": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.CONSUMER.NAMES.PACE_RESULTS", "$JS.API.CONSUMER.NAMES.PACE_LEDGER",
			"$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$JS.API.INFO", "pace.metrics.*.raw", "$KV.pace_leases.collector", "pace.metrics.*.dead",
			"$O.pace_dead_letters.>", "$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>",
			"$JS.API.STREAM.PURGE.OBJ_pace_dead_letters", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.MSG.GET.*",
			"$JS.API.CONSUMER.INFO.*.>", "$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter",
			"$JS.API.CONSUMER.CREATE.PACE_RESULTS.>", "$JS.API.CONSUMER.INFO.PACE_RESULTS.>",
			"$JS.API.CONSUMER.DELETE.PACE_RESULTS.>", "$JS.API.CONSUMER.CREATE.PACE_LEDGER.>",
			"$JS.API.CONSUMER.INFO.PACE_LEDGER.>", "$JS.API.CONSUMER.DELETE.PACE_LEDGER.>",
			"$JS.API.DIRECT.GET.KV_pace_workers.>", "$JS.API.CONSUMER.CREATE.KV_pace_workers.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_workers.>", "$JS.FC.KV_pace_workers.>", "$JS.API.DIRECT.GET.KV_pace_leases.>",
			"$JS.API.CONSUMER.CREATE.KV_pace_leases.>", "$JS.API.CONSUMER.DELETE.KV_pace_leases.>", "$JS.FC.KV_pace_leases.>",
			"$JS.API.DIRECT.GET.KV_pace_jobs.>", "$JS.API.STREAM.MSG.GET.KV_pace_jobs",
			"$JS.API.CONSUMER.CREATE.KV_pace_jobs.>", "$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>",
		},
		Subscribe: []string{"pace.work.*", "pace.results.*.*", "pace.ledger.*.*", "pace.dead.*", "pace.jobs.*.*", "_INBOX.>"},
	},
	"pace-processor": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$JS.API.INFO", "pace.metrics.*.progress",
			"pace.metrics.*.dead", "$KV.pace_leases.processor", "$O.pace_dead_letters.>",
			"$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>", "$JS.API.STREAM.PURGE.OBJ_pace_dead_letters", "$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter", "$JS.API.CONSUMER.INFO.PACE_WORK.ledger",
			"$JS.API.CONSUMER.CREATE.PACE_METRICS.>", "$JS.API.CONSUMER.INFO.PACE_METRICS.>",
			"$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.>", "$JS.ACK.PACE_METRICS.>", "$JS.API.DIRECT.GET.KV_pace_leases.>",
			"$JS.API.CONSUMER.CREATE.KV_pace_leases.>", "$JS.API.CONSUMER.DELETE.KV_pace_leases.>", "$JS.FC.KV_pace_leases.>",
			"$JS.API.DIRECT.GET.KV_pace_jobs.>", "$JS.API.STREAM.MSG.GET.KV_pace_jobs",
			"$JS.API.CONSUMER.CREATE.KV_pace_jobs.>", "$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>",
		},
		Subscribe: []string{"_INBOX.>"},
	},
	"pace-sink": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$JS.API.INFO", "$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter", "$JS.API.CONSUMER.INFO.PACE_WORK.ledger",
			"pace.metrics.*.dead", "$O.pace_dead_letters.>", "$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>",
			"$JS.API.STREAM.PURGE.OBJ_pace_dead_letters", "$JS.API.CONSUMER.CREATE.PACE_METRICS.>",
			"$JS.API.CONSUMER.INFO.PACE_METRICS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.>",
			"$JS.API.CONSUMER.DELETE.PACE_METRICS.>", "$JS.ACK.PACE_METRICS.>", "$JS.API.DIRECT.GET.KV_pace_jobs.>",
			"$JS.API.STREAM.MSG.GET.KV_pace_jobs", "$JS.API.CONSUMER.CREATE.KV_pace_jobs.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>",
		},
		Subscribe: []string{"pace.jobs.*.*", "_INBOX.>"},
	},
	"pace-controller": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "pace.decisions.*", "$KV.pace_controller.>",
			"$KV.pace_leases.controller", "pace.metrics.*.dead", "$O.pace_dead_letters.>",
			"$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>", "$JS.API.STREAM.PURGE.OBJ_pace_dead_letters", "$JS.API.INFO",
			"$JS.API.STREAM.INFO.*", "$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter",
			"$JS.API.CONSUMER.INFO.PACE_WORK.ledger", "$JS.API.STREAM.CREATE.KV_pace_controller",
			"$JS.API.STREAM.UPDATE.KV_pace_controller", "$JS.API.DIRECT.GET.KV_pace_controller.>",
			"$JS.API.STREAM.MSG.GET.KV_pace_controller", "$JS.API.CONSUMER.CREATE.PACE_METRICS.>",
			"$JS.API.CONSUMER.INFO.PACE_METRICS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.>", "$JS.ACK.PACE_METRICS.>",
			"$JS.API.DIRECT.GET.KV_pace_leases.>", "$JS.API.CONSUMER.CREATE.KV_pace_leases.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_leases.>", "$JS.FC.KV_pace_leases.>", "$JS.API.DIRECT.GET.KV_pace_jobs.>",
			"$JS.API.STREAM.MSG.GET.KV_pace_jobs", "$JS.API.CONSUMER.CREATE.KV_pace_jobs.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>",
		},
		Subscribe: []string{"_INBOX.>"},
	},
	"pace-gate": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$JS.API.INFO", "pace.k8s.outcomes", "pace.admission.>",
			"$KV.pace_flowcontrol.>", "$KV.pace_leases.gate", "pace.logs.*", "pace.control.fail", "pace.metrics.*.usage",
			"pace.metrics.*.dead", "$O.pace_dead_letters.>", "$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>",
			"$JS.API.STREAM.PURGE.OBJ_pace_dead_letters", "pace.jobs.*.scaled", "$KV.pace_jobs.*", "$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter", "$JS.API.CONSUMER.INFO.PACE_WORK.ledger",
			"$JS.API.CONSUMER.CREATE.PACE_K8S.>", "$JS.API.CONSUMER.INFO.PACE_K8S.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_K8S.>",
			"$JS.ACK.PACE_K8S.>", "$JS.API.DIRECT.GET.KV_pace_flowcontrol.>", "$JS.API.STREAM.MSG.GET.KV_pace_flowcontrol",
			"$JS.API.CONSUMER.CREATE.KV_pace_flowcontrol.>", "$JS.API.CONSUMER.DELETE.KV_pace_flowcontrol.>",
			"$JS.FC.KV_pace_flowcontrol.>", "$JS.API.DIRECT.GET.KV_pace_leases.>", "$JS.API.CONSUMER.CREATE.KV_pace_leases.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_leases.>", "$JS.FC.KV_pace_leases.>", "$JS.API.DIRECT.GET.KV_pace_jobs.>",
			"$JS.API.STREAM.MSG.GET.KV_pace_jobs", "$JS.API.CONSUMER.CREATE.KV_pace_jobs.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>", "$KV.pace_workers.>",
			"$JS.API.DIRECT.GET.KV_pace_clusters.>", "$JS.API.STREAM.MSG.GET.KV_pace_clusters",
			"$JS.API.CONSUMER.CREATE.KV_pace_clusters.>", "$JS.API.CONSUMER.DELETE.KV_pace_clusters.>",
			"$JS.FC.KV_pace_clusters.>",
		},
		Subscribe: []string{"pace.flowcontrol.dump", "_INBOX.>"},
		Responses: true,
	},
	"pace-actuator": {
		Publish: []string{
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$JS.API.INFO", "pace.k8s.requests", "pace.jobs.>",
			"$KV.pace_jobs.>", "$KV.pace_leases.actuator", "pace.metrics.*.dead", "$O.pace_dead_letters.>",
			"$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>", "$JS.API.STREAM.PURGE.OBJ_pace_dead_letters",
			"$JS.API.CONSUMER.CREATE.PACE_METRICS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.>",
			"$JS.API.CONSUMER.DELETE.PACE_METRICS.>", "$JS.API.CONSUMER.INFO.PACE_METRICS.>", "$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter", "$JS.API.CONSUMER.INFO.PACE_WORK.ledger",
			"$JS.API.CONSUMER.CREATE.PACE_DECISIONS.>", "$JS.API.CONSUMER.INFO.PACE_DECISIONS.>",
			"$JS.API.CONSUMER.MSG.NEXT.PACE_DECISIONS.>", "$JS.ACK.PACE_DECISIONS.>", "$JS.API.CONSUMER.CREATE.PACE_JOBS.>",
			"$JS.API.CONSUMER.INFO.PACE_JOBS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_JOBS.>", "$JS.API.CONSUMER.DELETE.PACE_JOBS.>",
			"$JS.ACK.PACE_JOBS.>",
			"$JS.API.DIRECT.GET.KV_pace_leases.>", "$JS.API.CONSUMER.CREATE.KV_pace_leases.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_leases.>", "$JS.FC.KV_pace_leases.>", "$JS.API.DIRECT.GET.KV_pace_jobs.>",
			"$JS.API.STREAM.MSG.GET.KV_pace_jobs", "$JS.API.CONSUMER.CREATE.KV_pace_jobs.>",
			"$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>",
		},
		Subscribe: []string{"pace.k8s.outcomes", "_INBOX.>"},
	},
	"pace-visualizer": {
		Publish: []string{
			"pace.flowcontrol.dump", "pace.metrics.*.dead", "$O.pace_dead_letters.>",
			"$JS.API.DIRECT.GET.OBJ_pace_dead_letters.>", "$JS.API.STREAM.PURGE.OBJ_pace_dead_letters",
			"$JS.API.CONSUMER.LIST.*", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES", "$JS.API.INFO", "$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.INFO.PACE_ADVISORIES.dead-letter", "$JS.API.CONSUMER.INFO.*.>",
			"$JS.API.CONSUMER.CREATE.PACE_JOBS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_JOBS.>",
			"$JS.API.CONSUMER.DELETE.PACE_JOBS.>", "$JS.API.CONSUMER.INFO.PACE_JOBS.>", "$JS.API.CONSUMER.CREATE.PACE_LOGS.>",
			"$JS.API.CONSUMER.MSG.NEXT.PACE_LOGS.>", "$JS.API.CONSUMER.DELETE.PACE_LOGS.>", "$JS.API.CONSUMER.INFO.PACE_LOGS.>",
			"$JS.API.CONSUMER.CREATE.PACE_RESULTS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_RESULTS.>",
			"$JS.API.CONSUMER.DELETE.PACE_RESULTS.>", "$JS.API.CONSUMER.INFO.PACE_RESULTS.>",
			"$JS.API.CONSUMER.CREATE.PACE_DEAD.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_DEAD.>",
			"$JS.API.CONSUMER.DELETE.PACE_DEAD.>", "$JS.API.CONSUMER.INFO.PACE_DEAD.>",
			"$JS.API.CONSUMER.CREATE.PACE_METRICS.>", "$JS.API.CONSUMER.MSG.NEXT.PACE_METRICS.>",
			"$JS.API.CONSUMER.DELETE.PACE_METRICS.>", "$JS.API.CONSUMER.INFO.PACE_METRICS.>",
			"$JS.API.DIRECT.GET.KV_pace_jobs.>", "$JS.API.STREAM.MSG.GET.KV_pace_jobs",
			"$JS.API.CONSUMER.CREATE.KV_pace_jobs.>", "$JS.API.CONSUMER.DELETE.KV_pace_jobs.>", "$JS.FC.KV_pace_jobs.>",
		},
		Subscribe: []string{"_INBOX.>"},
	},
	"pace-admin": {
		Publish: []string{
			">",
		},
		Subscribe: []string{">"},
	},
}
