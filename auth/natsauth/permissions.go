package natsauth

import (
	"github.com/nats-io/jwt/v2"

	"github.com/pace-platform/pace/schemas"
)

// Streams a tenant reads per job, with the subject of one job in each.
var readable = []struct {
	family  string
	subject func(p schemas.Prefix, job string) string
}{
	{"RESULTS", func(p schemas.Prefix, job string) string { return p.Results(job, ">") }},
	{"DEAD", func(p schemas.Prefix, job string) string { return p.Dead(job) }},
	{"LOGS", func(p schemas.Prefix, job string) string { return p.Logs(job) }},
	{"JOBS", func(p schemas.Prefix, job string) string { return p.Jobs(job, schemas.JobEventType(">")) }},
	{"DECISIONS", func(p schemas.Prefix, job string) string { return p.Decisions(job) }},
	{"METRICS", func(p schemas.Prefix, job string) string { return p.Metrics(job, schemas.ProgressMetrics) }},
}

// stageConsumers are the durable consumers Pace's stages read the streams
// of readable with (their default names): a caller who could fetch from one
// would take its stage's messages (and read every job's), one who could
// update or delete it would stop its stage. The collector's counting
// consumers have unguessable names instead (per job, so they cannot be
// listed here).
var stageConsumers = map[string][]string{
	"METRICS":   {"processor", "controller", "sink-influx", "sink-prom"},
	"DECISIONS": {"pace-actuator"},
	"JOBS":      {"pace-actuator-events"},
}

// common are the rights of every caller: account and stream state (which
// opening a stream or bucket reads), and replies under its own inbox.
func common(p schemas.Prefix, inbox string) jwt.Permissions {
	var perms jwt.Permissions
	perms.Pub.Allow.Add("$JS.API.INFO", "$JS.API.STREAM.INFO.*")
	perms.Sub.Allow.Add(inbox + ".>")
	for family, names := range stageConsumers {
		for _, name := range names {
			api := "$JS.API.CONSUMER.*." + p.Stream(family) + "." + name // info, delete; create with a filter
			perms.Pub.Deny.Add(api, api+".>", "$JS.API.CONSUMER.MSG.NEXT."+p.Stream(family)+"."+name)
		}
	}
	// Reading a consumer one has created: its name is random, and no
	// caller may list consumers, so a name is known only to its creator.
	for _, r := range readable {
		s := p.Stream(r.family)
		perms.Pub.Allow.Add("$JS.API.CONSUMER.MSG.NEXT."+s+".*", "$JS.API.CONSUMER.INFO."+s+".*",
			"$JS.API.CONSUMER.DELETE."+s+".*")
	}
	jobs := kvStream(p)
	perms.Pub.Allow.Add("$JS.API.CONSUMER.DELETE."+jobs+".*", "$JS.API.CONSUMER.INFO."+jobs+".*", "$JS.FC."+jobs+".>")
	return perms
}

// kvStream is the stream of the jobs bucket.
func kvStream(p schemas.Prefix) string { return "KV_" + p.Bucket("jobs") }

// readJob lets a caller read job's record and its streams: results, dead
// letters, logs, events, decisions and progress. Consumers are created with
// the filter in the API subject, so the server checks it is job's.
func readJob(perms *jwt.Permissions, p schemas.Prefix, job string) {
	for _, r := range readable {
		perms.Pub.Allow.Add("$JS.API.CONSUMER.CREATE." + p.Stream(r.family) + ".*." + r.subject(p, job))
	}
	jobs := kvStream(p)
	key := "$KV." + p.Bucket("jobs") + "." + job
	perms.Pub.Allow.Add("$JS.API.DIRECT.GET."+jobs+"."+key, "$JS.API.CONSUMER.CREATE."+jobs+".*."+key)
}

// workJob lets a caller process job's items: fetch them from the job's
// work consumer, acknowledge them, store results, dead letters and failures,
// and announce its presence.
func workJob(perms *jwt.Permissions, p schemas.Prefix, job string) {
	work, consumer := p.Stream("WORK"), "work-"+job
	if job == "*" { // every job's consumer: an admin
		consumer = "*"
	}
	perms.Pub.Allow.Add(
		"$JS.API.CONSUMER.CREATE."+work+"."+consumer+"."+p.Work(job),
		"$JS.API.CONSUMER.INFO."+work+"."+consumer,
		"$JS.API.CONSUMER.MSG.NEXT."+work+"."+consumer,
		"$JS.ACK."+work+"."+consumer+".>",
		p.Results(job, "*"), p.Dead(job),
		"$KV."+p.Bucket("failures")+"."+job+".>", "$KV."+p.Bucket("workers")+"."+job+".>",
		"$JS.API.DIRECT.GET.KV_"+p.Bucket("failures")+".$KV."+p.Bucket("failures")+"."+job+".>",
	)
}

// Tenant returns the permissions of a user owning jobs: submit and control
// jobs (the manager checks each request's owner), push items to, process,
// and read each of the jobs.
func Tenant(p schemas.Prefix, inbox string, jobs []string) jwt.Permissions {
	perms := common(p, inbox)
	perms.Pub.Allow.Add(p.Submit(), p.Control("*"))
	for _, job := range jobs {
		perms.Pub.Allow.Add(p.Work(job))
		readJob(&perms, p, job)
		workJob(&perms, p, job)
	}
	return perms
}

// Worker returns the permissions of job's workers: process its items and
// read its record, nothing of another job.
func Worker(p schemas.Prefix, inbox, job string) jwt.Permissions {
	perms := common(p, inbox)
	readJob(&perms, p, job)
	workJob(&perms, p, job)
	return perms
}

// Admin returns the permissions of pace:admins: a tenant of every job, who
// may also read the admission events and list streams.
func Admin(p schemas.Prefix, inbox string) jwt.Permissions {
	perms := Tenant(p, inbox, []string{"*"})
	perms.Pub.Allow.Add("$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES",
		"$JS.API.CONSUMER.CREATE."+p.Stream("ADMISSION")+".*.>",
		"$JS.API.CONSUMER.MSG.NEXT."+p.Stream("ADMISSION")+".*",
		"$JS.API.CONSUMER.DELETE."+p.Stream("ADMISSION")+".*")
	return perms
}
