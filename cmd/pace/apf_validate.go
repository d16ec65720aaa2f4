package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

func newAPFValidateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check FlowSchemas and priority levels in a YAML or JSON file",
		Long: `Validate decodes, defaults and validates every object of FILE as the API
server would. It exits 0 when all are valid, and 1 after printing each
problem with its field path otherwise. Schemas that reference a priority
level found neither in FILE nor in the defaults are reported as dangling.`,
		Example: "  pace apf validate examples/flowcontrol/health-for-strangers.yaml",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			objs, err := policy.LoadFile(args[0])
			if err != nil {
				var agg interface{ Errors() []error }
				if errors.As(err, &agg) {
					for _, e := range agg.Errors() {
						fmt.Fprintln(a.stdout, e)
					}
					return fmt.Errorf("%s: %d invalid field(s)", args[0], len(agg.Errors()))
				}
				return err
			}
			d := policy.Compile(policy.Overlay(policy.Defaults(), objs))
			for _, name := range d.Dangling {
				fmt.Fprintf(a.stdout, "FlowSchema %s: dangling: its priority level does not exist (ignored)\n", name)
			}
			fmt.Fprintf(a.stdout, "%s: %d FlowSchema(s), %d PriorityLevelConfiguration(s) valid\n", args[0], len(objs.FlowSchemas), len(objs.PriorityLevels))
			return nil
		},
	}
}
