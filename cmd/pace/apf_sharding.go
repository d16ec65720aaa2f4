package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/flowcontrol/shufflesharding"
)

type apfShardingOptions struct {
	hands, queues, elephants []int
}

func newAPFShardingTableCmd(a *app) *cobra.Command {
	o := &apfShardingOptions{}
	cmd := &cobra.Command{
		Use:   "sharding-table",
		Short: "Tabulate the chance that elephants crush a mouse under shuffle sharding",
		Long: `Sharding-table prints, for each (hand size, queue count), the probability
that a given low-traffic flow (a mouse) finds every queue of its hand
occupied by the given numbers of heavy flows (elephants), computed with the
recurrence of the APF KEP. Probabilities use Go's shortest float format.`,
		Example: `  pace apf sharding-table --hand 8 --queues 64 --elephants 1,4,16
  pace apf sharding-table --hand 12,10,8,6 --queues 32,64,128,256`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error { return o.run(a) },
	}
	cmd.Flags().IntSliceVar(&o.hands, "hand", []int{8}, "hand sizes")
	cmd.Flags().IntSliceVar(&o.queues, "queues", []int{64}, "queue counts")
	cmd.Flags().IntSliceVar(&o.elephants, "elephants", []int{1, 4, 16}, "elephant counts")
	return cmd
}

func (o *apfShardingOptions) run(a *app) error {
	for _, h := range o.hands {
		for _, q := range o.queues {
			if _, err := shufflesharding.NewDealer(q, h); err != nil {
				return usageError("--hand %d --queues %d: %v", h, q, err)
			}
		}
	}
	for _, e := range o.elephants {
		if e < 1 {
			return usageError("--elephants %d: must be >= 1", e)
		}
	}
	head := []string{"HandSize", "Queues"}
	for _, e := range o.elephants {
		head = append(head, fmt.Sprintf("%d elephant(s)", e))
	}
	fmt.Fprintln(a.stdout, strings.Join(head, "\t"))
	for _, h := range o.hands {
		for _, q := range o.queues {
			row := []string{fmt.Sprint(h), fmt.Sprint(q)}
			for _, e := range o.elephants {
				row = append(row, fmt.Sprintf("%v", shufflesharding.MouseCrushProbability(q, h, e)))
			}
			fmt.Fprintln(a.stdout, strings.Join(row, "\t"))
		}
	}
	return nil
}
