package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// maxErrorLength bounds the error text kept for a failing item.
const maxErrorLength = 4096

// recordFailure remembers an item's last error so that its dead letter can
// name it. It is best effort: a lost record only loses the text.
func (c *Client) recordFailure(ctx context.Context, job, item string, cause error) {
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(failuresBucket))
	if err == nil {
		msg := cause.Error()
		if len(msg) > maxErrorLength {
			msg = msg[:maxErrorLength]
		}
		_, err = kv.Put(ctx, job+"."+item, []byte(msg))
	}
	if err != nil {
		c.log.Warn("item error not recorded", "job", job, "item", item, "err", err)
	}
}

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event Pace reads.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// DeadLetters moves items that used up their deliveries from the work stream
// to pace.dead.<job>, with the reason and the last error a worker reported,
// until ctx ends. The server announces such items with an advisory that the
// advisories stream keeps, so none is missed while this loop is down. One
// instance per installation is enough; more are safe.
func (c *Client) DeadLetters(ctx context.Context) error {
	cons, err := c.js.Consumer(ctx, c.prefix.Stream(advisoriesFamily), deadLetterConsumer)
	if err != nil {
		return fmt.Errorf("dead-letter consumer (was the bus provisioned?): %w", err)
	}
	work, err := c.js.Stream(ctx, c.prefix.Stream(workFamily))
	if err != nil {
		return fmt.Errorf("work stream: %w", err)
	}
	failures, err := c.js.KeyValue(ctx, c.prefix.Bucket(failuresBucket))
	if err != nil {
		return fmt.Errorf("failures bucket: %w", err)
	}
	pause := newPause(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(64, jetstream.FetchContext(fctx))
		if err == nil {
			for msg := range batch.Messages() {
				if err := c.deadLetter(ctx, work, failures, msg.Data()); err != nil {
					c.log.Warn("dead-lettering failed, will retry", "err", err)
					_ = msg.NakWithDelay(time.Second)
					continue
				}
				_ = msg.Ack()
			}
			err = batch.Error()
		}
		cancel()
		if err = ignoreWaitEnd(err); err != nil && ctx.Err() == nil {
			c.log.Warn("dead-letter fetch failed", "err", err)
			pause.wait(ctx)
			continue
		}
		pause.reset()
	}
	return nil
}

func (c *Client) deadLetter(ctx context.Context, work jetstream.Stream, failures jetstream.KeyValue, advisory []byte) error {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(advisory, &adv); err != nil || adv.StreamSeq == 0 {
		c.log.Error("unreadable max-deliveries advisory dropped", "advisory", string(advisory), "err", err)
		return nil
	}
	job, ok := strings.CutPrefix(adv.Consumer, "work-")
	if !ok {
		return nil // not a Pace work consumer
	}
	raw, err := work.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Acknowledged after all (a late success): the item has its result.
		return nil
	}
	if err != nil {
		return fmt.Errorf("read item %d: %w", adv.StreamSeq, err)
	}
	d := &schemas.DeadLetter{Job: job, Reason: schemas.MaxDeliveries, Deliveries: int(adv.Deliveries),
		Payload: string(raw.Data), Sequence: adv.StreamSeq, At: c.now()}
	item, derr := Decode[schemas.WorkItem](raw.Data, raw.Header)
	if derr != nil {
		d.Reason, d.LastError = schemas.Malformed, derr.Error()
	} else {
		d.ItemID, d.Payload = item.ID, item.Payload
		d.LastError = "lease expired: no worker finished the item in time"
		if e, err := failures.Get(ctx, job+"."+item.ID); err == nil {
			d.LastError = string(e.Value())
		}
	}
	dctx := MessageContext(ctx, raw.Header)
	if err := c.publishDeadLetter(dctx, d, fmt.Sprintf("%s/seq/%d", job, adv.StreamSeq)); err != nil {
		return err
	}
	if err := work.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("remove dead item %d: %w", adv.StreamSeq, err)
	}
	if d.ItemID != "" {
		_ = failures.Delete(ctx, job+"."+d.ItemID)
	}
	c.log.Warn("item dead-lettered", "job", job, "item", d.ItemID, "deliveries", d.Deliveries, "last_error", d.LastError)
	return nil
}
