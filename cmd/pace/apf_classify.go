package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/internal/auth"
)

type apfClassifyOptions struct {
	attrs    policy.Attributes
	resource string
	config   string
	output   string
}

func newAPFClassifyCmd(a *app) *cobra.Command {
	o := &apfClassifyOptions{}
	cmd := &cobra.Command{
		Use:   "classify",
		Short: "Show which FlowSchema, priority level and queues a request gets",
		Long: `Classify runs APF's classification on a described request: the first
matching FlowSchema by (matchingPrecedence, name), its priority level, the
flow distinguisher, the flow hash and the hand of queues it may use.
A request with --resource is a resource request, otherwise --path makes it
a non-resource one. Authenticated users are also in system:authenticated;
system:anonymous is in system:unauthenticated.`,
		Example: `  pace apf classify --user alice --verb get --resource pods --namespace default
  pace apf classify --user system:node:n1 --group system:nodes --verb patch --resource nodes/status
  pace apf classify --user system:anonymous --verb get --path /healthz/etcd -o json
  pace apf classify --user x --verb list --resource events --flowcontrol-config my-apf.yaml`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), a) },
	}
	f := cmd.Flags()
	f.StringVar(&o.attrs.User, "user", auth.Anonymous, "user name")
	f.StringSliceVar(&o.attrs.Groups, "group", nil, "group (repeatable)")
	f.StringVar(&o.attrs.Verb, "verb", "get", "verb: get, list, watch, create, update, patch, delete, deletecollection; for paths the lower-case method")
	f.StringVar(&o.resource, "resource", "", "resource, or resource/subresource")
	f.StringVar(&o.attrs.APIGroup, "api-group", "", `API group ("" is the core group)`)
	f.StringVar(&o.attrs.Namespace, "namespace", "", "namespace (empty: cluster-scoped or all namespaces)")
	f.StringVar(&o.attrs.Name, "name", "", "object name")
	f.StringVar(&o.attrs.Path, "path", "", "URL path of a non-resource request")
	// These describe one request: PACE_USER, PACE_PATH and the like mean other things.
	noEnv(f, "user", "group", "verb", "resource", "api-group", "namespace", "name", "path")
	addPolicyFile(f, &o.config)
	addPolicyFileAlias(f, &o.config)
	choiceVarP(f, &o.output, "output", "o", "table", "output format", "table", "json")
	return cmd
}

type classifyResult struct {
	FlowSchema    string `json:"flowSchema"`
	PriorityLevel string `json:"priorityLevel"`
	Distinguisher string `json:"distinguisher"`
	Hash          uint64 `json:"hash"`
	Hand          []int  `json:"hand"`
}

func (o *apfClassifyOptions) run(_ context.Context, a *app) error {
	if (o.resource == "") == (o.attrs.Path == "") {
		return usageError("give exactly one of --resource and --path")
	}
	attrs := o.attrs
	attrs.Groups = slices.Clone(attrs.Groups)
	if o.resource != "" {
		attrs.IsResourceRequest = true
		attrs.Resource, attrs.Subresource, _ = strings.Cut(o.resource, "/")
	}
	extra := auth.Authenticated
	if attrs.User == auth.Anonymous {
		extra = auth.Unauthenticated
	}
	if !slices.Contains(attrs.Groups, extra) {
		attrs.Groups = append(attrs.Groups, extra)
	}
	objs := policy.Defaults()
	if o.config != "" {
		file, err := policy.LoadFile(o.config)
		if err != nil {
			return rejected(fmt.Errorf("--flowcontrol-config: %w", err))
		}
		objs = policy.Overlay(objs, file)
	}
	c := policy.Compile(objs).Classify(attrs)
	res := classifyResult{FlowSchema: c.FlowSchema.Name, PriorityLevel: c.PriorityLevel.Name, Distinguisher: c.Distinguisher, Hash: c.Hash, Hand: c.Hand()}
	if res.Hand == nil {
		res.Hand = []int{}
	}
	if o.output == "json" {
		enc := json.NewEncoder(a.stdout)
		return enc.Encode(res)
	}
	fmt.Fprintf(a.stdout, "FLOWSCHEMA\t%s\nPRIORITYLEVEL\t%s\nDISTINGUISHER\t%s\nHASH\t%d\nHAND\t%v\n",
		res.FlowSchema, res.PriorityLevel, res.Distinguisher, res.Hash, res.Hand)
	return nil
}
