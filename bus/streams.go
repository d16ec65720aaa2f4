package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// Stream returns a handle on family's stream, looked up once per client.
// Looking a stream up is a stream-info request, as costly as most requests
// made with the handle, and the handle names the stream, so it serves for
// the client's life. Its requests (Info, GetMsg, Purge, …) read the
// stream as it is; its CachedInfo is the first lookup's.
func (c *Client) Stream(ctx context.Context, family schemas.Stream) (jetstream.Stream, error) {
	c.streamsMu.Lock()
	st, ok := c.handles[family]
	c.streamsMu.Unlock()
	if ok {
		return st, nil
	}
	name := c.prefix.Stream(family)
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	c.streamsMu.Lock()
	defer c.streamsMu.Unlock()
	if c.handles == nil {
		c.handles = map[schemas.Stream]jetstream.Stream{}
	}
	c.handles[family] = st
	return st, nil
}
