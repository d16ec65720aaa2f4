package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// clusteredReplicas is the replication factor Pace uses on a cluster that
// can place it: three copies survive the loss of any one server.
const clusteredReplicas = 3

// maxReplicas is JetStream's upper bound on a stream's replication factor.
const maxReplicas = 5

// Server error codes meaning "this many replicas cannot be placed".
const (
	errCodeNoPeers             jetstream.ErrorCode = 10005 // clustered, too few suitable servers
	errCodeInsufficient        jetstream.ErrorCode = 10023 // clustered, too few resources
	errCodeReplicasUnsupported jetstream.ErrorCode = 10074 // not clustered
)

// placeableReplicas reports the replication factor Pace can use on the
// JetStream deployment behind c: 1 on a standalone server, 3 on a cluster
// whose meta group can place three replicas now, else 1.
//
// A client of an ordinary account cannot read the meta group, and the
// servers advertised in INFO (connect_urls) neither say which run JetStream
// nor survive no_advertise. So on a cluster the answer comes from the
// meta leader itself: a three-replica memory stream is created and deleted
// (needing $JS.API.STREAM.CREATE and .DELETE on <PREFIX>_PROBE).
func (c *Client) placeableReplicas(ctx context.Context) (int, error) {
	cluster := c.nc.ConnectedClusterName()
	if cluster == "" {
		return 1, nil
	}
	probe := jetstream.StreamConfig{
		Name: c.prefix.Stream(schemas.StreamProbe), Description: "placement probe of Provision; deleted at once",
		Subjects: []string{string(c.prefix) + ".probe"}, Storage: jetstream.MemoryStorage,
		Replicas: clusteredReplicas, MaxMsgs: 1, Discard: jetstream.DiscardNew,
	}
	_, err := c.js.CreateOrUpdateStream(ctx, probe)
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeNoPeers, errCodeInsufficient, errCodeReplicasUnsupported:
			c.log.Warn("jetstream cluster cannot place 3 replicas; streams get 1",
				"cluster", cluster, "reason", apiErr.Description)
			return 1, nil
		}
	}
	if err != nil {
		return 0, fmt.Errorf("probe replica placement on cluster %s: %w", cluster, err)
	}
	if err := c.js.DeleteStream(ctx, probe.Name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, fmt.Errorf("delete placement probe %s: %w", probe.Name, err)
	}
	return clusteredReplicas, nil
}

// replicas resolves Limits.Replicas: an explicit value is used as given;
// zero (auto) is 1 on a standalone server, 3 when every object in have
// exists with three replicas or more, and otherwise asks the cluster. It
// logs what it chose and why.
func (c *Client) replicas(ctx context.Context, explicit int, have map[string]*jetstream.StreamConfig) (int, error) {
	if explicit < 0 || explicit > maxReplicas {
		return 0, fmt.Errorf("provision: replicas %d: must be 0 (auto) to %d", explicit, maxReplicas)
	}
	if explicit > 0 {
		c.log.Info("stream replicas set", "replicas", explicit, "source", "explicit")
		return explicit, nil
	}
	replicated := len(have) > 0
	for _, cfg := range have {
		replicated = replicated && cfg != nil && cfg.Replicas >= clusteredReplicas
	}
	if replicated {
		// Nothing to create or scale: no probe, which needs rights on
		// streams that stages other than the manager do not have.
		return clusteredReplicas, nil
	}
	n, err := c.placeableReplicas(ctx)
	if err != nil {
		return 0, err
	}
	// n is also what is known of the cluster's size: at least n servers.
	c.log.Info("stream replicas detected", "cluster", c.nc.ConnectedClusterName(),
		"jetstream_servers_min", n, "replicas", n, "source", "auto")
	return n, nil
}

// keepReplicas returns the replicas to ask for an existing object: in auto
// mode Pace never lowers them, so that a probe made while one server of a
// three-server cluster is down does not shrink streams that are R3.
func keepReplicas(auto bool, want int, existing *jetstream.StreamConfig) int {
	if auto && existing != nil && existing.Replicas > want {
		return existing.Replicas
	}
	return want
}

// Replicas returns the replication factor the bus was provisioned with
// (that of the jobs bucket), for stages that create buckets of their own.
func (c *Client) Replicas(ctx context.Context) (int, error) {
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(jobsBucket))
	if err != nil {
		return 0, fmt.Errorf("jobs bucket (was the bus provisioned?): %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("jobs bucket: %w", err)
	}
	return st.Config().Replicas, nil
}
