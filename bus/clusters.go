package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// ErrClusterNotFound is returned by ClusterFor for a cluster that is not
// registered.
var ErrClusterNotFound = errors.New("cluster not registered")

// ClusterFor returns the registered cluster name, and its revision in the
// clusters bucket; with name "" the active cluster, or nil when none is
// active (a job naming no cluster then runs on the installation's own).
func (c *Client) ClusterFor(ctx context.Context, name string) (*schemas.Cluster, uint64, error) {
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(schemas.BucketClusters))
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound) && name == "":
		return nil, 0, nil // none registered yet
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, 0, fmt.Errorf("%q: %w", name, ErrClusterNotFound)
	case err != nil:
		return nil, 0, fmt.Errorf("clusters: %w", err)
	}
	if name != "" {
		return cluster(ctx, kv, name)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("clusters: %w", err)
	}
	defer keys.Stop() //nolint:errcheck // read only
	for key := range keys.Keys() {
		cl, rev, err := cluster(ctx, kv, key)
		if errors.Is(err, ErrClusterNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, 0, err
		}
		if cl.Active {
			return cl, rev, nil
		}
	}
	return nil, 0, nil
}

func cluster(ctx context.Context, kv jetstream.KeyValue, name string) (*schemas.Cluster, uint64, error) {
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, fmt.Errorf("%q: %w", name, ErrClusterNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cluster %s: %w", name, err)
	}
	var cl schemas.Cluster
	if err := json.Unmarshal(e.Value(), &cl); err != nil {
		return nil, 0, fmt.Errorf("cluster %s: %w: %w", name, ErrMalformed, err)
	}
	return &cl, e.Revision(), nil
}
