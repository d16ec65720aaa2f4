package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/policy"

	"github.com/pace-platform/pace/schemas"
)

// MaintenancePeriod is how often the configuration is maintained, as in kube-apiserver.
const MaintenancePeriod = time.Minute

// ConfigStore is the live APF configuration in JetStream. Several Pace
// instances may maintain and watch it at once: writes are compare-and-set.
type ConfigStore struct {
	kv  jetstream.KeyValue
	log *slog.Logger
}

// OpenConfig opens the bucket, which bus provisioning creates.
func OpenConfig(ctx context.Context, c *bus.Client, log *slog.Logger) (*ConfigStore, error) {
	kv, err := c.JetStream().KeyValue(ctx, c.Prefix().Bucket(schemas.BucketFlowControl))
	if err != nil {
		return nil, fmt.Errorf("flowcontrol config bucket: %w", err)
	}
	return &ConfigStore{kv: kv, log: log.With("stage", "flowcontrol-config")}, nil
}

// Load reads every stored object with its revision; undecodable entries are
// logged and skipped.
func (s *ConfigStore) Load(ctx context.Context) (policy.Objects, map[string]uint64, error) {
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return policy.Objects{}, nil, fmt.Errorf("list flowcontrol config: %w", err)
	}
	defer lister.Stop() //nolint:errcheck // read-only
	entries := map[string]jetstream.KeyValueEntry{}
	for key := range lister.Keys() {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return policy.Objects{}, nil, fmt.Errorf("get %s: %w", key, err)
		}
		entries[key] = e
	}
	objs, revs := s.decode(entries)
	return objs, revs, nil
}

// decode turns stored entries into objects and their revisions, with
// defaults set; undecodable entries are logged and skipped.
func (s *ConfigStore) decode(entries map[string]jetstream.KeyValueEntry) (policy.Objects, map[string]uint64) {
	var objs policy.Objects
	revs := make(map[string]uint64, len(entries))
	for key, e := range entries {
		revs[key] = e.Revision()
		switch {
		case strings.HasPrefix(key, "flowschemas."):
			fs := new(flowcontrolv1.FlowSchema)
			if err := json.Unmarshal(e.Value(), fs); err != nil {
				s.log.Warn("bad stored flow schema skipped", "key", key, "err", err)
				continue
			}
			objs.FlowSchemas = append(objs.FlowSchemas, fs)
		case strings.HasPrefix(key, "prioritylevels."):
			pl := new(flowcontrolv1.PriorityLevelConfiguration)
			if err := json.Unmarshal(e.Value(), pl); err != nil {
				s.log.Warn("bad stored priority level skipped", "key", key, "err", err)
				continue
			}
			objs.PriorityLevels = append(objs.PriorityLevels, pl)
		}
	}
	policy.SetDefaults(&objs)
	return objs, revs
}

// Maintain runs one config maintenance (policy.Maintain) with
// compare-and-set writes and returns how many changes it made; a change
// another instance made first is skipped.
func (s *ConfigStore) Maintain(ctx context.Context) (int, error) {
	objs, revs, err := s.Load(ctx)
	if err != nil {
		return 0, err
	}
	return s.maintain(ctx, objs, revs)
}

// maintain is Maintain on objs, stored at revs.
func (s *ConfigStore) maintain(ctx context.Context, objs policy.Objects, revs map[string]uint64) (int, error) {
	n := 0
	for _, ch := range policy.Maintain(objs) {
		key := ch.Key()
		var obj any = ch.FlowSchema
		if ch.FlowSchema == nil {
			obj = ch.PriorityLevel
		}
		val, err := json.Marshal(obj)
		if err != nil {
			return n, err
		}
		switch ch.Op {
		case policy.OpCreate:
			_, err = s.kv.Create(ctx, key, val)
		case policy.OpUpdate:
			_, err = s.kv.Update(ctx, key, val, revs[key])
		case policy.OpDelete:
			err = s.kv.Delete(ctx, key, jetstream.LastRevision(revs[key]))
		}
		switch {
		case err == nil:
			n++
			s.log.Info("flowcontrol object maintained", "op", string(ch.Op), "key", key)
		case bus.Conflict(err):
			s.log.Debug("flowcontrol object changed concurrently", "key", key) // the next round reconciles
		default:
			return n, fmt.Errorf("%s %s: %w", ch.Op, key, err)
		}
	}
	return n, nil
}

// Run maintains the configuration at start and every MaintenancePeriod, and
// reconfigures gate whenever the stored objects change, with file (the
// --flowcontrol-config objects) applied over them. It returns nil when ctx
// ends. After the first maintenance it reads the bucket only through its
// watch: the stored objects are what the watch delivered, so that a quiet
// configuration costs no request.
func (s *ConfigStore) Run(ctx context.Context, gate *apf.Gate, file policy.Objects) error {
	if _, err := s.Maintain(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	updates := consume.Updates(wctx, s.kv, ">")
	tick := time.NewTicker(MaintenancePeriod)
	defer tick.Stop()
	stored := map[string]jetstream.KeyValueEntry{}
	dirty, current := false, false // current: the watch has delivered every stored object
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if !current {
				continue
			}
			objs, revs := s.decode(stored)
			if _, err := s.maintain(ctx, objs, revs); err != nil && ctx.Err() == nil {
				s.log.Warn("flowcontrol config maintenance failed", "err", err)
			}
		case u, ok := <-updates:
			switch e := u.Entry; {
			case !ok: // ctx ended
				return nil
			case u.Err != nil:
				return fmt.Errorf("flowcontrol config: %w", u.Err)
			case e == nil:
				current = true
			case e.Operation() == jetstream.KeyValuePut:
				stored[e.Key()] = e
			default:
				delete(stored, e.Key())
			}
			dirty = true
			if len(updates) > 0 {
				continue // coalesce a burst of changes
			}
		}
		if dirty && current {
			dirty = false
			s.apply(ctx, gate, file, stored)
		}
	}
}

func (s *ConfigStore) apply(ctx context.Context, gate *apf.Gate, file policy.Objects, stored map[string]jetstream.KeyValueEntry) {
	objs, _ := s.decode(stored)
	objs = policy.Overlay(objs, file)
	if err := gate.Reconfigure(ctx, objs); err != nil {
		s.log.Error("flowcontrol reconfiguration failed", "err", err)
		return
	}
	d := gate.Digest()
	for _, name := range d.Dangling {
		s.log.Warn("flow schema dangling: its priority level does not exist", "flow_schema", name)
	}
	s.log.Info("flowcontrol configuration applied", "flow_schemas", len(d.FlowSchemas()), "priority_levels", len(d.PriorityLevels()))
}
