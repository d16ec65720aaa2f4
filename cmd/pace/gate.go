package main

import "github.com/spf13/cobra"

func newGateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "Run an API Priority and Fairness gate",
		Long: `Gate runs API Priority and Fairness in front of an HTTP API. 'pace gate
proxy' is a reverse proxy that classifies Kubernetes-style requests and
queues them fairly before they reach the upstream.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError("%s needs a subcommand", cmd.CommandPath())
		},
	}
	cmd.AddCommand(newGateProxyCmd(a))
	return cmd
}
