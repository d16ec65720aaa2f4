package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// Work streams. By default every job's items share one work stream,
// PACE_WORK, on pace.work.*. JetStream bounds bytes per stream (or per
// account), not per subject, so on a bus shared by users who must not
// crowd one another out (Limits.QueuedBytesPerUser) each user's jobs have
// a work stream of their own, schemas.Prefix.UserWorkStream, bounded to
// the user's quota; PACE_WORK is then the stream of jobs with no owner.
// Such a stream lists the pace.work.<job> subjects of its user's jobs
// that accept items, no wildcard, since streams may not overlap: the
// manager adds a job's subject when it makes the job's work consumer, and
// removes it when the job ends, so a push to a job that does not exist or
// has ended is refused by the server at once. A user's stream is created
// with its first job, with the ledger's consumer, and deleted once no job
// of the user takes items and it holds none. Changes to users' streams
// take turns (lockWork).
//
// JetStream reserves a stream's bytes in its store when the stream is
// made, so a user's quota is theirs whatever the others queue; the store
// bounds how many users' streams fit (quota × users).

// userBytesKey is the metadata key of PACE_WORK naming the per-user bound
// of work streams; absent, every job shares PACE_WORK.
const userBytesKey = "pace.queued_bytes_per_user"

// workLayout is how the bus lays out work streams, read from PACE_WORK.
type workLayout struct {
	// perUser is Limits.QueuedBytesPerUser: zero when jobs share PACE_WORK.
	perUser int64
	// base is PACE_WORK's configuration, the template of users' streams.
	base jetstream.StreamConfig
}

// workStreams caches the layout and serializes the process's changes to
// users' work streams (see lockWork).
type workStreams struct {
	mu     sync.Mutex
	layout *workLayout // guarded by mu
	edit   sync.Mutex
}

// layout returns the bus's work layout, read once per client (after the
// bus is provisioned: a failed read is tried again).
func (c *Client) layout(ctx context.Context) (*workLayout, error) {
	c.work.mu.Lock()
	defer c.work.mu.Unlock()
	if c.work.layout != nil {
		return c.work.layout, nil
	}
	name := c.prefix.Stream(workFamily)
	st, err := c.js.Stream(ctx, name) // not the handle Stream keeps: Provision may have changed it since
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	l := &workLayout{base: cfg}
	if v, ok := cfg.Metadata[userBytesKey]; ok {
		if l.perUser, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("work stream metadata %s=%q: %w", userBytesKey, v, err)
		}
	}
	c.work.layout = l
	return l, nil
}

// WorkStream returns the name of the stream holding the items of owner's
// jobs.
func (c *Client) WorkStream(ctx context.Context, owner string) (string, error) {
	l, err := c.layout(ctx)
	if err != nil {
		return "", err
	}
	if l.perUser == 0 || owner == "" {
		return c.prefix.Stream(workFamily), nil
	}
	return c.prefix.UserWorkStream(owner), nil
}

// jobWorkStream returns the name of the stream holding job's items, from
// its record; a job without one has its items, if any, on PACE_WORK.
func (c *Client) jobWorkStream(ctx context.Context, job string) (string, error) {
	l, err := c.layout(ctx)
	if err != nil {
		return "", err
	}
	if l.perUser == 0 {
		return c.prefix.Stream(workFamily), nil
	}
	rec, _, err := c.Jobs().Get(ctx, job)
	switch {
	case errors.Is(err, ErrJobNotFound):
		return c.prefix.Stream(workFamily), nil
	case err != nil:
		return "", err
	}
	return c.WorkStream(ctx, rec.Spec.Owner)
}

// workStreamNames lists the work streams: PACE_WORK and users' streams.
func (c *Client) workStreamNames(ctx context.Context) ([]string, error) {
	l, err := c.layout(ctx)
	if err != nil {
		return nil, err
	}
	shared := c.prefix.Stream(workFamily)
	if l.perUser == 0 {
		return []string{shared}, nil
	}
	names := []string{shared}
	list := c.js.StreamNames(ctx)
	for name := range list.Name() {
		if c.prefix.IsUserWorkStream(name) {
			names = append(names, name)
		}
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("list work streams: %w", err)
	}
	return names, nil
}

// acceptWork makes sure rec's job's subject is among its work stream's,
// creating a user's stream (with the ledger's consumer, and its advisories
// among the advisories stream's subjects) with the user's first job, then
// calls then with the stream's name. Nothing is changed when jobs share
// PACE_WORK, whose pace.work.* takes every job's. On a user's stream, then
// runs with the work streams locked (see lockWork).
func (c *Client) acceptWork(ctx context.Context, rec *schemas.JobRecord, then func(stream string) error) error {
	l, err := c.layout(ctx)
	if err != nil {
		return err
	}
	name, err := c.WorkStream(ctx, rec.Spec.Owner)
	if err != nil {
		return err
	}
	if l.perUser == 0 {
		return then(name)
	}
	unlock, err := c.lockWork(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	subject := c.prefix.Work(rec.ID)
	err = c.editSubjectsLocked(ctx, name, func(s []string) []string {
		if slices.Contains(s, subject) {
			return nil
		}
		return append(s, subject)
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = c.createUserStream(ctx, l, name, subject, rec.Spec.Owner)
	}
	if err != nil {
		return err
	}
	return then(name)
}

// createUserStream makes the user owner's work stream name, taking subject,
// with the work streams locked.
func (c *Client) createUserStream(ctx context.Context, l *workLayout, name, subject, owner string) error {
	if err := c.editSubjectsLocked(ctx, c.prefix.Stream(advisoriesFamily), func(s []string) []string {
		if slices.Contains(s, c.advisories(name)) {
			return nil
		}
		return append(s, c.advisories(name))
	}); err != nil {
		return err
	}
	cfg := l.base
	cfg.Name, cfg.Description, cfg.Subjects = name, "work items of one user's jobs", []string{subject}
	cfg.MaxBytes, cfg.Metadata = l.perUser, nil
	if _, err := c.js.CreateStream(ctx, cfg); err != nil {
		return fmt.Errorf("work stream of %s: %w", owner, err)
	}
	c.log.Info("work stream created", "stream", name, "owner", owner, "max_bytes", l.perUser)
	return c.ensureLedgerConsumer(ctx, name)
}

// refuseWork deletes job's work consumer of the work stream name and takes
// the job's subject off the stream, which then refuses its pushes; the
// items it holds stay. A user's stream left idle is deleted (dropIfIdle).
func (c *Client) refuseWork(ctx context.Context, name, job string) error {
	l, err := c.layout(ctx)
	if err != nil {
		return err
	}
	if l.perUser == 0 {
		return c.deleteWorkConsumer(ctx, name, job)
	}
	unlock, err := c.lockWork(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.deleteWorkConsumer(ctx, name, job); err != nil {
		return err
	}
	subject := c.prefix.Work(job)
	err = c.editSubjectsLocked(ctx, name, func(s []string) []string {
		i := slices.Index(s, subject)
		if i < 0 {
			return nil
		}
		if s = slices.Delete(s, i, i+1); len(s) == 0 {
			s = []string{name} // a stream has a subject: its own name, which no one publishes to
		}
		return s
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.dropIdleLocked(ctx, name)
}

// deleteWorkConsumer deletes job's work consumer of the stream name; one
// already gone is no error.
func (c *Client) deleteWorkConsumer(ctx context.Context, name, job string) error {
	err := c.js.DeleteConsumer(ctx, name, schemas.WorkConsumer(job))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete work consumer of %s: %w", job, err)
	}
	return nil
}

// dropIfIdle deletes the user's work stream name once it takes no job's
// items and holds none, so that its bytes go back to the store; the user's
// next job makes it again.
func (c *Client) dropIfIdle(ctx context.Context, name string) error {
	if !c.prefix.IsUserWorkStream(name) {
		return nil
	}
	unlock, err := c.lockWork(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return c.dropIdleLocked(ctx, name)
}

// dropIdleLocked is dropIfIdle with the work streams locked.
func (c *Client) dropIdleLocked(ctx context.Context, name string) error {
	st, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	info := st.CachedInfo()
	if info.State.Msgs > 0 || !slices.Equal(info.Config.Subjects, []string{name}) {
		return nil
	}
	if err := c.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete idle work stream %s: %w", name, err)
	}
	c.log.Info("work stream deleted: its user has no job taking items", "stream", name)
	adv := c.advisories(name)
	return c.editSubjectsLocked(ctx, c.prefix.Stream(advisoriesFamily), func(s []string) []string {
		i := slices.Index(s, adv)
		if i < 0 {
			return nil
		}
		return slices.Delete(s, i, i+1)
	})
}

// workLock is the key of the leases bucket held while a process changes
// users' work streams.
const workLock = "work-subjects"

// lockWork locks users' work streams, within the process and across the
// manager's replicas (by holding workLock), while they are changed: their
// subjects (JetStream updates a stream's whole configuration, so of two
// edits read at once, the second to land would undo the first), their
// creation and deletion, and their work consumers' (nats-server 2.15
// races a stream's update with a consumer's creation on it). A holder
// that died lets go when the bucket's TTL (Limits.LeaseTTL) expires its
// key. The returned func unlocks.
func (c *Client) lockWork(ctx context.Context) (func(), error) {
	c.work.edit.Lock()
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(leasesBucket))
	if err != nil {
		c.work.edit.Unlock()
		return nil, fmt.Errorf("leases bucket: %w", err)
	}
	pause := newPause(10*time.Millisecond, 250*time.Millisecond)
	for {
		rev, err := kv.Create(ctx, workLock, []byte(c.nc.Opts.Name))
		if err == nil {
			return func() {
				_ = kv.Delete(context.WithoutCancel(ctx), workLock, jetstream.LastRevision(rev))
				c.work.edit.Unlock()
			}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			c.work.edit.Unlock()
			return nil, fmt.Errorf("lock work streams: %w", err)
		}
		if pause.wait(ctx); ctx.Err() != nil {
			c.work.edit.Unlock()
			return nil, fmt.Errorf("lock work streams: %w", ctx.Err())
		}
	}
}

// editSubjectsLocked sets the subjects of stream name to edit's answer,
// given them (nil leaves them), with the work streams locked.
func (c *Client) editSubjectsLocked(ctx context.Context, name string, edit func([]string) []string) error {
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	subjects := edit(slices.Clone(cfg.Subjects))
	if subjects == nil {
		return nil
	}
	cfg.Subjects = subjects
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("subjects of stream %s: %w", name, err)
	}
	return nil
}

// advisories is the subject of the server's max-deliveries advisories
// about consumers of stream.
func (c *Client) advisories(stream string) string { return maxDeliveriesAdvisories + stream + ".*" }

// advisorySubjects returns the subjects the advisories stream is to have,
// given old: PACE_WORK's advisories, and those of users' work streams old
// lists.
func (c *Client) advisorySubjects(old []string) []string {
	subjects := []string{c.advisories(c.prefix.Stream(workFamily))}
	for _, s := range old {
		stream, ok := strings.CutSuffix(strings.TrimPrefix(s, maxDeliveriesAdvisories), ".*")
		if ok && c.prefix.IsUserWorkStream(stream) {
			subjects = append(subjects, s)
		}
	}
	return subjects
}

// userWorkSubjects returns the subjects PACE_WORK is to have, given its
// configuration old (nil: none yet), when each user has a work stream: the
// job subjects it lists already. A PACE_WORK taking every job's items
// (pace.work.*) must be empty to become one user's.
func (c *Client) userWorkSubjects(ctx context.Context, old *jetstream.StreamConfig) ([]string, error) {
	all := c.prefix.Work("*")
	if old == nil {
		return []string{c.prefix.Stream(workFamily)}, nil
	}
	if !slices.Contains(old.Subjects, all) {
		return old.Subjects, nil
	}
	st, err := c.js.Stream(ctx, old.Name)
	if err != nil {
		return nil, err
	}
	if n := st.CachedInfo().State.Msgs; n > 0 {
		return nil, fmt.Errorf("a work stream per user needs the shared work stream %s empty first: it holds %d items (run with one work stream for every job, --max-user-queued-bytes -1, until they are done, or drop them)", old.Name, n)
	}
	return []string{c.prefix.Stream(workFamily)}, nil
}

// isWorkStream tells a work stream's name from other streams'.
func (c *Client) isWorkStream(name string) bool {
	return name == c.prefix.Stream(workFamily) || c.prefix.IsUserWorkStream(name)
}

// workConsumer returns the work consumer of rec's job.
func (c *Client) workConsumer(ctx context.Context, rec *schemas.JobRecord) (jetstream.Consumer, error) {
	name, err := c.WorkStream(ctx, rec.Spec.Owner)
	if err != nil {
		return nil, err
	}
	return c.jobConsumer(ctx, name, rec.ID)
}

// jobConsumer returns job's work consumer of the work stream name; with
// the stream gone (an idle user's, deleted), the consumer is not found.
func (c *Client) jobConsumer(ctx context.Context, name, job string) (jetstream.Consumer, error) {
	cons, err := c.js.Consumer(ctx, name, schemas.WorkConsumer(job))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: stream %s gone", jetstream.ErrConsumerNotFound, name)
	}
	return cons, err
}
