package natsauth

import (
	"github.com/nats-io/jwt/v2"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// stageConsumers are the durable consumers Pace's stages read the streams
// of bus.JobStreams with (their default names): a caller who could fetch from one
// would take its stage's messages (and read every job's), one who could
// update or delete it would stop its stage. The collector's counting
// consumers have unguessable names instead (per job, so they cannot be
// listed here).
var stageConsumers = map[schemas.Stream][]string{
	schemas.StreamMetrics:   {"processor", "controller", "sink-influx", "sink-prom"},
	schemas.StreamDecisions: {"pace-actuator"},
	schemas.StreamJobs:      {"pace-actuator-events"},
}

// common are the rights of every caller: account and stream state (which
// opening a stream or bucket reads), and replies under its own inbox.
func common(p schemas.Prefix, inbox string) jwt.Permissions {
	var perms jwt.Permissions
	perms.Pub.Allow.Add("$JS.API.INFO", "$JS.API.STREAM.INFO.*")
	perms.Sub.Allow.Add(inbox + ".>")
	for family, names := range stageConsumers {
		for _, name := range names {
			api := "$JS.API.CONSUMER.*." + p.Stream(family) + "." + name // info, delete
			perms.Pub.Deny.Add(api, api+".>", "$JS.API.CONSUMER.MSG.NEXT."+p.Stream(family)+"."+name)
		}
	}
	// Reading through a consumer the manager made for the caller
	// (pace.control.read): its name is random, and no caller may list
	// consumers, so a name is known only to whoever asked for it. No caller
	// may create a consumer: its deliver subject, which permissions cannot
	// see, would let it have the server copy its messages into any stream.
	for _, s := range bus.JobStreams {
		s := p.Stream(s.Family)
		perms.Pub.Allow.Add("$JS.API.CONSUMER.MSG.NEXT."+s+".*", "$JS.API.CONSUMER.INFO."+s+".*",
			"$JS.API.CONSUMER.DELETE."+s+".*")
	}
	perms.Pub.Allow.Add(p.Control("read"))
	return perms
}

// kvStream is the stream of the jobs bucket.
func kvStream(p schemas.Prefix) string { return "KV_" + p.Bucket(schemas.BucketJobs) }

// readJob lets a caller read job's record; its streams are read through
// consumers the manager makes (pace.control.read), which checks the job.
func readJob(perms *jwt.Permissions, p schemas.Prefix, job string) {
	perms.Pub.Allow.Add("$JS.API.DIRECT.GET." + kvStream(p) + ".$KV." + p.Bucket(schemas.BucketJobs) + "." + job)
}

// workJob lets a caller process job's items: fetch them from the job's
// work consumer (which the manager makes), acknowledge them, store results,
// dead letters and failures, and announce its presence.
func workJob(perms *jwt.Permissions, p schemas.Prefix, job string) {
	work, consumer := p.Stream(schemas.StreamWork), "work-"+job
	if job == "*" { // every job's consumer: an admin
		consumer = "*"
	}
	perms.Pub.Allow.Add(
		"$JS.API.CONSUMER.INFO."+work+"."+consumer,
		"$JS.API.CONSUMER.MSG.NEXT."+work+"."+consumer,
		"$JS.ACK."+work+"."+consumer+".>",
		p.Results(job, "*"), p.Dead(job),
		"$KV."+p.Bucket(schemas.BucketFailures)+"."+job+".>", "$KV."+p.Bucket(schemas.BucketWorkers)+"."+job+".>",
		"$JS.API.DIRECT.GET.KV_"+p.Bucket(schemas.BucketFailures)+".$KV."+p.Bucket(schemas.BucketFailures)+"."+job+".>",
	)
}

// Tenant returns the permissions of a user owning jobs: submit and control
// jobs (the manager checks each request's owner), push items to, process,
// and read each of the jobs.
func Tenant(p schemas.Prefix, inbox string, jobs []string) jwt.Permissions {
	perms := common(p, inbox)
	perms.Pub.Allow.Add(p.Submit(), p.Control("stop"), p.Control("terminate"), p.Control("declare")) // not fail: the stages
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
		"$JS.API.CONSUMER.MSG.NEXT."+p.Stream(schemas.StreamAdmission)+".*",
		"$JS.API.CONSUMER.INFO."+p.Stream(schemas.StreamAdmission)+".*",
		"$JS.API.CONSUMER.DELETE."+p.Stream(schemas.StreamAdmission)+".*")
	return perms
}
