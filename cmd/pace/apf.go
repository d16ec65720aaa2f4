package main

import (
	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

func newAPFCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apf",
		Short: "Inspect API Priority and Fairness configuration",
		Long: `Apf works with the FlowSchemas and PriorityLevelConfigurations
(flowcontrol.apiserver.k8s.io/v1) that Pace's gates enforce: print the
defaults, validate a file, classify a request, and tabulate shuffle
sharding's collision probabilities.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError("%s needs a subcommand", cmd.CommandPath())
		},
	}
	cmd.AddCommand(newAPFDefaultsCmd(a), newAPFValidateCmd(a), newAPFClassifyCmd(a), newAPFShardingTableCmd(a))
	return cmd
}

func newAPFDefaultsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "defaults",
		Short: "Print the default FlowSchemas and priority levels as YAML",
		Long: `Defaults prints the mandatory (exempt, catch-all) and suggested objects,
kube-apiserver's and Pace's own, as multi-document YAML that kubectl apply
and --flowcontrol-config accept.`,
		Example: "  pace apf defaults > apf.yaml",
		Args:    exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			b, err := policy.Defaults().Marshal()
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
}
