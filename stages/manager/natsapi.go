package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// serveNATS answers submissions on pace.submit and commands on
// pace.control.stop, pace.control.terminate, pace.control.declare (see
// Declare), pace.control.read (see Read) and pace.control.fail (see Fail),
// with the same code path and errors as the HTTP API, and passes on the
// requests of the readers Read makes (see passRead). The returned func
// unsubscribes and waits for running handlers.
func (m *Stage) serveNATS(ctx context.Context) (func(), error) {
	nc := m.bus.Conn()
	p := m.bus.Prefix()
	var wg sync.WaitGroup
	handle := func(fn func(ctx context.Context, u auth.User, msg *nats.Msg) (any, error)) nats.MsgHandler {
		return func(msg *nats.Msg) {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(bus.MessageContext(ctx, msg.Header), m.cfg.RequestTimeout)
				defer cancel()
				if tracing.Enabled() {
					var span trace.Span
					rctx, span = tracing.Tracer().Start(rctx, "receive "+msg.Subject, trace.WithSpanKind(trace.SpanKindServer),
						trace.WithAttributes(attribute.String("messaging.system", "nats"),
							attribute.String("messaging.destination.name", msg.Subject),
							attribute.String("messaging.operation.type", "receive")))
					defer span.End()
				}
				var reply any
				u, err := m.natsUser(msg)
				if err == nil {
					reply, err = fn(rctx, u, msg)
				}
				if err != nil {
					reply = asAPIError(err)
				}
				data, _ := json.Marshal(reply)
				if err := msg.Respond(data); err != nil {
					m.log.Warn("nats reply lost", "subject", msg.Subject, "err", err)
				}
			})
		}
	}
	const queue = "pace-manager"
	subs := make([]*nats.Subscription, 0, 6)
	for subject, fn := range map[string]func(context.Context, auth.User, *nats.Msg) (any, error){
		p.Submit(): func(ctx context.Context, u auth.User, msg *nats.Msg) (any, error) {
			rec, err := m.Submit(ctx, u, msg.Data, msg.Header.Get("Content-Type"))
			if err != nil {
				return nil, err
			}
			return bus.SubmitReply{JobID: rec.ID, State: string(rec.State)}, nil
		},
		p.Control("stop"): func(ctx context.Context, u auth.User, msg *nats.Msg) (any, error) {
			return m.command(ctx, u, msg.Data, m.Stop)
		},
		p.Control("terminate"): func(ctx context.Context, u auth.User, msg *nats.Msg) (any, error) {
			return m.command(ctx, u, msg.Data, m.Terminate)
		},
		p.Control("declare"): func(ctx context.Context, u auth.User, msg *nats.Msg) (any, error) {
			return m.command(ctx, u, msg.Data, m.Declare)
		},
		p.Control("read"): func(ctx context.Context, u auth.User, msg *nats.Msg) (any, error) {
			return m.Read(ctx, u, callerID(msg), msg.Data)
		},
		p.Control("fail"): func(ctx context.Context, _ auth.User, msg *nats.Msg) (any, error) {
			rec, err := m.Fail(ctx, msg.Data)
			if err != nil {
				return nil, err
			}
			return bus.SubmitReply{JobID: rec.ID, State: string(rec.State)}, nil
		},
	} {
		sub, err := nc.QueueSubscribe(subject, queue, handle(fn))
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, err
		}
		subs = append(subs, sub)
	}
	// Readers' JetStream requests, passed on to $JS.API (see passRead).
	reads, err := nc.QueueSubscribe(bus.ReaderAPIPrefix(p, "*")+".>", queue, m.passRead)
	if err != nil {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		return nil, err
	}
	subs = append(subs, reads)
	// A job whose progress moved is checked at the next pass (see due).
	progress, err := nc.Subscribe(p.Metrics("*", schemas.ProgressMetrics), func(msg *nats.Msg) {
		if pr, err := bus.Decode[schemas.Progress](msg.Data, msg.Header); err == nil {
			m.moved(pr)
		}
	})
	if err != nil {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		return nil, err
	}
	subs = append(subs, progress)
	return func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		wg.Wait()
	}, nil
}

func (m *Stage) command(ctx context.Context, u auth.User, data []byte,
	fn func(context.Context, auth.User, string) (*schemas.JobRecord, error)) (any, error) {
	var ref struct {
		JobID string `json:"job_id"`
	}
	var errs field.ErrorList
	if len(bytes.TrimSpace(data)) > 0 {
		errs, _ = decodeStrict(data, &ref, nil)
	}
	if len(errs) == 0 && ref.JobID == "" {
		errs = field.ErrorList{field.Required(field.NewPath("job_id"), `send {"job_id": "…"}`)}
	}
	if len(errs) > 0 {
		return nil, invalidAs("request", errs)
	}
	rec, err := fn(ctx, u, ref.JobID)
	if err != nil {
		return nil, err
	}
	return bus.SubmitReply{JobID: rec.ID, State: string(rec.State)}, nil
}

// passRead passes a reader's JetStream request (on its caller's
// bus.ReaderAPIPrefix, which the server lets only that caller publish to)
// on to $JS.API, for a consumer Read named for that caller: the server
// answers the caller directly, at the request's reply subject. A request
// for another's consumer is answered as if it did not exist; one whose
// reply subject is not an inbox is dropped, so that no caller can have the
// server publish its messages into a stream.
func (m *Stage) passRead(msg *nats.Msg) {
	if !strings.HasPrefix(msg.Reply, "_INBOX.") {
		m.log.Debug("reader request without an inbox dropped", "subject", msg.Subject, "reply", msg.Reply)
		return
	}
	target, ok := bus.ReaderTarget(m.bus.Prefix(), msg.Subject)
	if ok {
		fwd := &nats.Msg{Subject: target, Reply: msg.Reply, Header: msg.Header, Data: msg.Data}
		if err := m.bus.Conn().PublishMsg(fwd); err != nil {
			m.log.Warn("reader request lost", "subject", msg.Subject, "err", err)
		}
		return
	}
	m.log.Debug("reader request refused", "subject", msg.Subject)
	refusal := nats.NewMsg(msg.Reply)
	if strings.Contains(msg.Subject, ".CONSUMER.MSG.NEXT.") {
		// What a fetch from a consumer that does not exist gets.
		refusal.Header.Set("Status", "503")
	} else {
		refusal.Data = []byte(`{"error":{"code":404,"err_code":10014,"description":"consumer not found"}}`)
	}
	if err := m.bus.Conn().PublishMsg(refusal); err != nil {
		m.log.Warn("reader refusal lost", "subject", msg.Subject, "err", err)
	}
}

// callerID is the bus.CallerID of a NATS request's sender, from the token
// of its Authorization header (bus.WithTokenAuth sends the connection's).
func callerID(msg *nats.Msg) string {
	token, _ := strings.CutPrefix(msg.Header.Get("Authorization"), "Bearer ")
	return bus.CallerID(token)
}

// natsUser authenticates a NATS request like an HTTP one, from its
// Authorization header.
func (m *Stage) natsUser(msg *nats.Msg) (auth.User, error) {
	if m.authn == nil || msg.Header.Get("Authorization") == "" {
		return auth.AnonymousUser(), nil
	}
	r := &http.Request{Header: http.Header{"Authorization": {msg.Header.Get("Authorization")}}}
	u, ok, err := m.authn.Authenticate(r)
	if err != nil {
		return auth.User{}, apiError(http.StatusUnauthorized, "%v", err)
	}
	if !ok {
		return auth.AnonymousUser(), nil
	}
	return u, nil
}

// Read makes a consumer that reads one of a job's streams for a caller who
// may see the job, or any job's (and admission events) for an admin: on a
// bus that authenticates, tenants and workers cannot create consumers (see
// bus.ReadRequest). The consumer is a pull consumer without
// acknowledgements and deliver subject, deleted once unread for
// bus.ReaderIdle. Its name, bus.ReaderName(caller), binds it to caller, the
// bus.CallerID of the asker's token: only that caller reaches it, through
// its bus.ReaderAPIPrefix (see passRead).
func (m *Stage) Read(ctx context.Context, u auth.User, caller string, data []byte) (*bus.ReadReply, error) {
	if m.refusesAnonymous(u) {
		return nil, apiError(http.StatusUnauthorized, "reading a job needs credentials")
	}
	var req bus.ReadRequest
	if errs, _ := decodeStrict(data, &req, nil); len(errs) > 0 {
		return nil, invalidAs("request", errs)
	}
	cfg, job, errs := req.ReadConfig(m.bus.Prefix())
	if len(errs) > 0 {
		return nil, invalidAs("request", errs)
	}
	switch admin := m.callerOf(u).admin; {
	case admin: // every job's, those that no longer or do not yet exist too
	case job == "":
		return nil, apiError(http.StatusForbidden, "filter_subject %s spans jobs: only admins read every job's messages",
			req.FilterSubject)
	default:
		if _, err := m.Job(ctx, u, job); err != nil {
			return nil, err
		}
	}
	cfg.Name = bus.ReaderName(caller)
	if _, err := m.bus.JetStream().CreateConsumer(ctx, req.Stream, cfg); err != nil {
		return nil, fmt.Errorf("reader of %s on %s: %w", req.FilterSubject, req.Stream, err)
	}
	return &bus.ReadReply{Stream: req.Stream, Consumer: cfg.Name, APIPrefix: bus.ReaderAPIPrefix(m.bus.Prefix(), caller)}, nil
}
