// Package policysource keeps an APF gate's FlowSchemas and
// PriorityLevelConfigurations current while it serves: from the cluster the
// gate fronts, through client-go informers (Cluster), or from a file,
// reloaded when it changes (File). Both hand each new set of objects to an
// Apply, normally apf.Gate.Reconfigure, which switches classification at once
// and keeps the queues of the priority levels that stay.
package policysource

import (
	"context"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

// Apply installs a set of objects.
type Apply func(ctx context.Context, objs policy.Objects) error

// Source feeds Apply the objects in force, first as soon as it has read
// them, then after each change, until ctx ends (it then returns nil). It
// returns an error when it cannot read the objects at all at first.
type Source interface {
	Run(ctx context.Context, apply Apply) error
}
