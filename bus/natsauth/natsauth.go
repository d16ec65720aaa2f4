// Package natsauth authenticates the NATS connections of Pace's tenants and
// workers: it is the service behind the NATS server's auth callout.
//
// Pace's stages log in as their own users with static permissions
// (deploy/nats/auth.conf); any other connection presents a token, which the
// server hands to this service on $SYS.REQ.USER.AUTH. The service answers
// with a user JWT, signed by the callout's issuer key, whose permissions the
// server then enforces on every publish and subscription:
//
//   - a token of the token file (the HTTP API's) makes a tenant: submit and
//     control jobs, and push items to, process and read the jobs the user
//     owns when connecting (a connection's rights are fixed then; connect
//     again to reach jobs submitted since), at most MaxJobs of them;
//   - the same for a user of pace:admins or system:masters, for every job;
//   - a job token (JobTokens, given to the workers Pace starts) makes a
//     worker of that one job;
//   - anything else is refused.
//
// Every caller may subscribe only under its inbox prefix (bus.InboxPrefix of
// its token), so callers sharing the server cannot read each other's
// replies, and may reach only the readers the manager made for it (through
// its bus.ReaderAPIPrefix), so none can fetch from, inspect or delete
// another's. Nobody but Pace's stages may write a bucket, publish job
// events, infrastructure requests or another job's subjects.
package natsauth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// MaxJobs bounds the jobs a tenant's connection is granted: the most
// recently created ones. Each job's rights take about 1.5 KB of the user
// JWT, which travels, encoded once more, in one message of the callout:
// 100 jobs make a 155 KB JWT, 500 would pass the 1 MiB max_payload.
const MaxJobs = 100

// CalloutSubject is where the server asks for authorization.
const CalloutSubject = "$SYS.REQ.USER.AUTH"

// Users identifies the holders of tokens of the token file.
type Users interface {
	Lookup(token string) (auth.User, bool)
}

// Service answers the server's authorization requests.
type Service struct {
	c      *bus.Client
	issuer nkeys.KeyPair
	users  Users
	jobs   *JobTokens
	log    *slog.Logger

	mu     sync.Mutex
	owners map[string][]string // user → jobs in creation order
	owner  map[string]string   // job → user

	// records is the jobs bucket's stream; seen, the last of its changes
	// the watch applied: a tenant's connection waits for the watch to
	// apply the changes made before it (catchUp).
	records jetstream.Stream
	seen    atomic.Uint64
}

// catchUpWait bounds how long a tenant's connection waits for the jobs its
// user has just submitted to be known.
const catchUpWait = 2 * time.Second

// New returns a service answering on c, which must be a connection of one
// of the server's auth callout users, and signing with issuer, the account
// key whose public key the server's auth callout names.
func New(c *bus.Client, issuer nkeys.KeyPair, users Users, jobs *JobTokens, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{c: c, issuer: issuer, users: users, jobs: jobs, log: log.With("stage", "natsauth"),
		owners: map[string][]string{}, owner: map[string]string{}}
}

// Run follows the job records' owners and answers authorization requests
// until ctx ends; cancellation returns nil.
func (s *Service) Run(ctx context.Context) error {
	kv, err := s.c.JetStream().KeyValue(ctx, s.c.Prefix().Bucket(schemas.BucketJobs))
	if err != nil {
		return fmt.Errorf("natsauth: jobs bucket: %w", err)
	}
	if s.records, err = s.c.JetStream().Stream(ctx, kvStream(s.c.Prefix())); err != nil {
		return fmt.Errorf("natsauth: jobs bucket's stream: %w", err)
	}
	var sub *nats.Subscription
	defer func() {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}()
	for e, err := range consume.Watch(ctx, kv, ">") {
		if err != nil {
			return fmt.Errorf("natsauth: %w", err)
		}
		if e != nil {
			s.follow(e)
			continue
		}
		// Every record seen: owners are known, answer from now on.
		if sub == nil {
			if sub, err = s.c.Conn().QueueSubscribe(CalloutSubject, "pace-natsauth", s.answer); err != nil {
				return fmt.Errorf("natsauth: subscribe %s: %w", CalloutSubject, err)
			}
			s.log.Info("nats authorization started")
		}
	}
	return nil
}

// follow records a job's owner from its record.
func (s *Service) follow(e jetstream.KeyValueEntry) {
	if r := e.Revision(); r > s.seen.Load() { // only this watch writes it
		defer s.seen.Store(r)
	}
	job := e.Key()
	var owner string
	if e.Operation() == jetstream.KeyValuePut {
		var rec schemas.JobRecord
		if json.Unmarshal(e.Value(), &rec) == nil {
			owner = rec.Spec.Owner
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.owner[job]; ok && old != owner {
		s.owners[old] = slices.DeleteFunc(s.owners[old], func(j string) bool { return j == job })
		delete(s.owner, job)
	}
	if _, ok := s.owner[job]; !ok && owner != "" {
		s.owner[job] = owner
		s.owners[owner] = append(s.owners[owner], job)
	}
}

// catchUp waits, at most catchUpWait, until the watch has applied every change
// the jobs bucket had when it was called, so that a job submitted just
// before its owner connects is among the connection's rights. Without an
// answer on the bucket's state it does not wait.
func (s *Service) catchUp() {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpWait)
	defer cancel()
	info, err := s.records.Info(ctx)
	if err != nil {
		s.log.Warn("jobs bucket's state unknown: rights from the jobs seen so far", "err", err)
		return
	}
	for s.seen.Load() < info.State.LastSeq && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// ownerOf returns the owner of job, "" when it has none or is unknown.
func (s *Service) ownerOf(job string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner[job]
}

// workStream names the work stream of owner's jobs.
func (s *Service) workStream(owner string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpWait)
	defer cancel()
	work, err := s.c.WorkStream(ctx, owner)
	if err != nil {
		return "", fmt.Errorf("work stream unknown: %w", err)
	}
	return work, nil
}

// workStreams names the work streams of every owner of a job seen, the
// stream of jobs with no owner first.
func (s *Service) workStreams() ([]string, error) {
	s.mu.Lock()
	owners := slices.Collect(maps.Keys(s.owners))
	s.mu.Unlock()
	slices.Sort(owners)
	works := []string{}
	for _, owner := range append([]string{""}, owners...) {
		work, err := s.workStream(owner)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(works, work) {
			works = append(works, work)
		}
	}
	return works, nil
}

// jobsOf returns the most recent MaxJobs jobs of user.
func (s *Service) jobsOf(user string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	jobs := s.owners[user]
	return slices.Clone(jobs[max(0, len(jobs)-MaxJobs):])
}

// answer decides one authorization request.
func (s *Service) answer(m *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil {
		s.log.Warn("unreadable authorization request", "err", err)
		return
	}
	name, perms, err := s.authorize(req.ConnectOptions.Token)
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	if err == nil {
		uc := jwt.NewUserClaims(req.UserNkey)
		uc.Name = name
		uc.Audience = server.DEFAULT_GLOBAL_ACCOUNT
		uc.Permissions = perms
		resp.Jwt, err = uc.Encode(s.issuer)
	}
	if err != nil {
		resp.Error = err.Error()
		s.log.Info("nats connection refused", "host", req.ClientInformation.Host, "name", req.ClientInformation.Name, "reason", err)
	}
	token, err := resp.Encode(s.issuer)
	if err != nil {
		s.log.Error("sign authorization response", "err", err)
		return
	}
	if err := m.Respond([]byte(token)); err != nil {
		s.log.Warn("authorization response lost", "err", err)
	}
}

// authorize maps a token to a user name and its permissions.
func (s *Service) authorize(token string) (string, jwt.Permissions, error) {
	if token == "" {
		return "", jwt.Permissions{}, fmt.Errorf("no token: connect with a Pace token (--token, PACE_TOKEN)")
	}
	p, caller := s.c.Prefix(), bus.CallerID(token)
	if job, ok := s.jobs.Job(token); ok {
		s.catchUp()
		work, err := s.workStream(s.ownerOf(job))
		if err != nil {
			return "", jwt.Permissions{}, err
		}
		return "worker:" + job, Worker(p, caller, work, job), nil
	}
	if s.users != nil {
		if u, ok := s.users.Lookup(token); ok {
			if u.IsAdmin() {
				s.catchUp()
				works, err := s.workStreams()
				if err != nil {
					return "", jwt.Permissions{}, err
				}
				return u.Name, Admin(p, caller, works), nil
			}
			s.catchUp()
			work, err := s.workStream(u.Name)
			if err != nil {
				return "", jwt.Permissions{}, err
			}
			return u.Name, Tenant(p, caller, work, s.jobsOf(u.Name)), nil
		}
	}
	return "", jwt.Permissions{}, fmt.Errorf("invalid token")
}

// ServerAuth returns how a server authenticates with this service: users
// (Pace's stages) log in with their passwords and skip the callout; every
// other connection is handed to the service signing with the returned
// issuer key (pass it to New).
func ServerAuth(users []*server.User) (*bus.ServerAuth, nkeys.KeyPair, error) {
	issuer, pub, err := NewIssuer()
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(users))
	for _, u := range users {
		names = append(names, u.Username)
	}
	return &bus.ServerAuth{Users: users, Issuer: pub, CalloutUsers: names}, issuer, nil
}

// NewIssuer returns a fresh account key pair for the auth callout: the
// server trusts answers signed by it (its public key goes to
// bus.ServerAuth.Issuer).
func NewIssuer() (nkeys.KeyPair, string, error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, "", err
	}
	pub, err := kp.PublicKey()
	return kp, pub, err
}
