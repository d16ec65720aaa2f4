package natsauth

import (
	"github.com/nats-io/jwt/v2"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// common are the rights of every caller, whose bus.CallerID is caller:
// account and stream state (which opening a stream or bucket reads),
// replies under its own inbox, and reading through the consumers the
// manager makes for it (pace.control.read).
//
// Those consumers are reached through the caller's own
// bus.ReaderAPIPrefix, never $JS.API: the manager passes a request on only
// for a consumer named for the caller in the subject, which the server
// lets no one else publish to. (A permission on $JS.API could not do it:
// the consumer's name is one token, and NATS wildcards match whole tokens
// only.) So no caller may fetch from, inspect or delete another's reader,
// or any stage's consumer, even knowing its name. No caller may create a
// consumer either: its deliver subject, which permissions cannot see, would
// let it have the server copy its messages into any stream.
func common(p schemas.Prefix, caller string) jwt.Permissions {
	var perms jwt.Permissions
	perms.Pub.Allow.Add("$JS.API.INFO", "$JS.API.STREAM.INFO.*")
	perms.Sub.Allow.Add(bus.CallerInbox(caller) + ".>")
	for _, s := range bus.JobStreams {
		readers(&perms, p, caller, p.Stream(s.Family))
	}
	perms.Pub.Allow.Add(p.Control("read"))
	return perms
}

// readers lets caller fetch from, inspect and delete its readers of stream.
func readers(perms *jwt.Permissions, p schemas.Prefix, caller, stream string) {
	api := bus.ReaderAPIPrefix(p, caller) + ".CONSUMER."
	perms.Pub.Allow.Add(api+"MSG.NEXT."+stream+".*", api+"INFO."+stream+".*", api+"DELETE."+stream+".*")
}

// kvStream is the stream of the jobs bucket.
func kvStream(p schemas.Prefix) string { return "KV_" + p.Bucket(schemas.BucketJobs) }

// readJob lets a caller read job's record; its streams are read through
// consumers the manager makes (pace.control.read), which checks the job.
func readJob(perms *jwt.Permissions, p schemas.Prefix, job string) {
	perms.Pub.Allow.Add("$JS.API.DIRECT.GET." + kvStream(p) + ".$KV." + p.Bucket(schemas.BucketJobs) + "." + job)
}

// workJob lets a caller process job's items: fetch them from the job's
// work consumer on the work stream named work (which the manager makes),
// acknowledge them, store results, dead letters and failures, and announce
// its presence.
func workJob(perms *jwt.Permissions, p schemas.Prefix, work, job string) {
	consumer := schemas.WorkConsumer(job)
	if job == "*" { // every job's consumer of the stream: an admin
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

// Tenant returns the permissions of a user owning jobs, whose items are on
// the work stream named work, and whose token's bus.CallerID is caller:
// submit and control jobs (the manager checks each request's owner), push
// items to, process, and read each of the jobs.
func Tenant(p schemas.Prefix, caller, work string, jobs []string) jwt.Permissions {
	perms := common(p, caller)
	perms.Pub.Allow.Add(p.Submit(), p.Control("stop"), p.Control("terminate"), p.Control("declare")) // not fail: the stages
	for _, job := range jobs {
		perms.Pub.Allow.Add(p.Work(job))
		readJob(&perms, p, job)
		workJob(&perms, p, work, job)
	}
	return perms
}

// Worker returns the permissions of job's workers, whose items are on the
// work stream named work and whose job token's bus.CallerID is caller:
// process its items and read its record, nothing of another job.
func Worker(p schemas.Prefix, caller, work, job string) jwt.Permissions {
	perms := common(p, caller)
	readJob(&perms, p, job)
	workJob(&perms, p, work, job)
	return perms
}

// Admin returns the permissions of pace:admins, whose token's
// bus.CallerID is caller: a tenant of every job on the work streams works
// (those that exist when it connects), who may also read the admission
// events and list streams.
func Admin(p schemas.Prefix, caller string, works []string) jwt.Permissions {
	perms := Tenant(p, caller, works[0], []string{"*"})
	for _, work := range works[1:] {
		workJob(&perms, p, work, "*")
	}
	perms.Pub.Allow.Add("$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES")
	readers(&perms, p, caller, p.Stream(schemas.StreamAdmission))
	return perms
}
