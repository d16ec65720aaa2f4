package visualizer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
)

// When Pace runs as separate stages, APF's state lives in the gate's
// leader and in every manager replica, not in the visualizer. Each of them
// answers a request on the prefix's FlowControlDump subject with its
// ProcessFlowControl: levels and top flows, the page's summary of its dump
// rather than the raw dump, whose queues and requests could outgrow NATS'
// max_payload on a busy gate. The visualizer publishes one request and gathers every answer for
// Config.AnswerWait (scatter-gather: it cannot know how many replicas
// run), or stops at once when the server reports no responders.

// flowControlStages are the stages holding APF state, whose answers the
// page expects.
var flowControlStages = []string{"gate", "manager"}

// ServeFlowControl answers the requests on FlowControlDump with fc's
// state, labelled with stage and replica, until ctx ends; it returns nil
// then, or the error of subscribing. Every answer is a fresh dump.
func ServeFlowControl(ctx context.Context, c *bus.Client, stage, replica string, fc FlowControl, log *slog.Logger) error {
	subject := c.Prefix().FlowControlDump()
	log = log.With("subject", subject)
	sub, err := c.Conn().Subscribe(subject, func(m *nats.Msg) {
		v := processView(fc.Dump())
		v.Stage, v.Replica = stage, replica
		b, err := json.Marshal(v)
		if err == nil {
			err = m.Respond(b)
		}
		if err != nil {
			log.Warn("flow-control answer not sent", "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	<-ctx.Done()
	if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Warn("flow-control subscription not removed", "err", err)
	}
	return nil
}

// SetRemoteFlowControl adds the flow-control page, fed by the answers of
// the processes holding APF state (ServeFlowControl) over c: pace stage
// visualizer. Call it before Register.
func (s *Stage) SetRemoteFlowControl(c *bus.Client) {
	s.fcView = func(ctx context.Context) (*FlowControlView, error) {
		return GatherFlowControl(ctx, c, s.cfg.AnswerWait, s.log)
	}
}

// GatherFlowControl asks every process holding APF state for it on
// FlowControlDump and returns the answers received within wait (fewer
// if ctx ends first), with the stages that did not answer. Answers that do
// not decode are logged and left out. It fails only when the request
// cannot be sent.
func GatherFlowControl(ctx context.Context, c *bus.Client, wait time.Duration, log *slog.Logger) (*FlowControlView, error) {
	nc, subject := c.Conn(), c.Prefix().FlowControlDump()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the inbox is this request's own
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	v := &FlowControlView{Processes: []ProcessFlowControl{}}
	for {
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil { // the wait is over, or nobody listens (nats.ErrNoResponders)
			break
		}
		var p ProcessFlowControl
		if err := json.Unmarshal(m.Data, &p); err != nil || p.Stage == "" {
			log.Warn("flow-control answer ignored", "subject", subject, "err", cmp.Or(err, errors.New("no stage")))
			continue
		}
		v.Processes = append(v.Processes, p)
	}
	slices.SortFunc(v.Processes, func(a, b ProcessFlowControl) int {
		return cmp.Or(cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.Replica, b.Replica))
	})
	for _, st := range flowControlStages {
		if !slices.ContainsFunc(v.Processes, func(p ProcessFlowControl) bool { return p.Stage == st }) {
			v.Missing = append(v.Missing, st)
		}
	}
	return v, nil
}
