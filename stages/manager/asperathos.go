package manager

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
)

// asperathosDoc is an Asperathos kubejobs submission (reference §2.1–2.5).
type asperathosDoc struct {
	Plugin     string      `json:"plugin"`
	PluginInfo *pluginInfo `json:"plugin_info"`
	EnableAuth *bool       `json:"enable_auth"`
	Username   string      `json:"username"`
	Password   string      `json:"password"`
}

type pluginInfo struct {
	Cmd                           []string            `json:"cmd"`
	Img                           string              `json:"img"`
	InitSize                      *int                `json:"init_size"`
	RedisWorkload                 string              `json:"redis_workload"`
	EnvVars                       map[string]string   `json:"env_vars"`
	ControlPlugin                 string              `json:"control_plugin"`
	ControlParameters             *controlParameters  `json:"control_parameters"`
	MonitorPlugin                 string              `json:"monitor_plugin"`
	MonitorInfo                   *monitorInfo        `json:"monitor_info"`
	EnableVisualizer              *bool               `json:"enable_visualizer"`
	VisualizerPlugin              string              `json:"visualizer_plugin"`
	VisualizerInfo                *visualizerInfo     `json:"visualizer_info"`
	Username                      string              `json:"username"`
	Password                      string              `json:"password"`
	ConfigID                      any                 `json:"config_id"`
	JobResourcesLifetime          *int                `json:"job_resources_lifetime"`
	EnableDetailedReport          *bool               `json:"enable_detailed_report"`
	TerminationGracePeriodSeconds *int                `json:"termination_grace_period_seconds"`
	Selectors                     []selector          `json:"selectors"`
	K8sResourcesControl           *k8sResourceControl `json:"k8s_resources_control"`
	Secrets                       []string            `json:"secrets"`
	ClusterName                   string              `json:"cluster_name"`
	// WorkerProtocol is Pace's own: how cmd takes its items, "redis" (the
	// default: Asperathos' workers read their job's Redis) or "nats" (a cmd
	// that runs 'pace worker'). Workers get that protocol's credential only.
	WorkerProtocol string `json:"worker_protocol"`
}

type controlParameters struct {
	ScheduleStrategy string            `json:"schedule_strategy"`
	Actuator         string            `json:"actuator"`
	CheckInterval    *int              `json:"check_interval"`
	MetricSource     string            `json:"metric_source"`
	MinRep           *int              `json:"min_rep"`
	MaxRep           *int              `json:"max_rep"`
	ActuationSize    *int              `json:"actuation_size"`
	TriggerUp        *float64          `json:"trigger_up"`
	TriggerDown      *float64          `json:"trigger_down"`
	HeuristicOptions *heuristicOptions `json:"heuristic_options"`
	MaxSize          *int              `json:"max_size"` // legacy, ignored
}

type heuristicOptions struct {
	ProportionalGain *float64 `json:"proportional_gain"`
	DerivativeGain   *float64 `json:"derivative_gain"`
	IntegralGain     *float64 `json:"integral_gain"`
}

type monitorInfo struct {
	ExpectedTime   *int     `json:"expected_time"`
	ClusterInfoURL string   `json:"cluster_info_url"`
	DesiredCost    *float64 `json:"desired_cost"`
}

type visualizerInfo struct {
	DatasourceType string `json:"datasource_type"`
	Theme          string `json:"theme"`
}

type selector struct {
	Key   any `json:"key"`
	Value any `json:"value"`
}

type k8sResourceControl struct {
	Limits   map[string]any `json:"limits"`
	Requests map[string]any `json:"requests"`
}

// controllerParams is what an Asperathos controller configuration becomes
// in JobSpec.Controller.Params: the settings of its scheduler, in the
// names of Pace's default (threshold) and pid controllers. The actuator
// and metric source are Asperathos' plumbing and are not passed on.
type controllerParams struct {
	ActuationSize    *int              `json:"actuation_size,omitempty"`
	TriggerUp        *float64          `json:"trigger_up,omitempty"`
	TriggerDown      *float64          `json:"trigger_down,omitempty"`
	HeuristicOptions *heuristicOptions `json:"heuristic_options,omitempty"`
}

// Asperathos plugin names this manager accepts.
var (
	asperathosManagerPlugins    = []string{"kubejobs"}
	asperathosControlPlugins    = []string{"kubejobs"}
	asperathosMonitorPlugins    = []string{"kubejobs", "kubejobs_cost"}
	asperathosVisualizerPlugins = []string{"k8s-grafana"}
	asperathosStrategies        = []string{"default", "pid"}
	asperathosActuators         = []string{"k8s_replicas", "nop"}
	asperathosMetricSources     = []string{"redis", "nop"}
)

// asperathosSpec checks an Asperathos submission as its manager, monitor
// and controller would together, but before anything runs, and maps it onto
// Pace's spec. Errors carry Asperathos field paths.
//
// lenient accepts what Asperathos accepted and Pace refuses otherwise, and
// says what it changed in the warnings: an empty cmd (the image's
// entrypoint), init_size below min_rep (raised to it), and no
// schedule_strategy (the job runs unscaled at init_size replicas, where
// Pace otherwise scales it with the default strategy).
func asperathosSpec(d *asperathosDoc, lenient bool) (schemas.JobSpec, []string, field.ErrorList) {
	var warnings []string
	var errs field.ErrorList
	root := field.NewPath("plugin_info")
	oneOf := func(p *field.Path, v string, allowed []string, required bool) {
		switch {
		case v == "" && required:
			errs = append(errs, field.Required(p, ""))
		case v != "" && !slices.Contains(allowed, v):
			errs = append(errs, field.NotSupported(p, v, allowed))
		}
	}
	oneOf(field.NewPath("plugin"), d.Plugin, asperathosManagerPlugins, true)
	pi := d.PluginInfo
	if pi == nil {
		return schemas.JobSpec{}, nil, append(errs, field.Required(root, "the kubejobs settings"))
	}
	if d.EnableAuth != nil && *d.EnableAuth && (d.Username == "" || d.Password == "") {
		errs = append(errs, field.Required(field.NewPath("username"), "enable_auth needs username and password"))
	}
	if len(pi.Cmd) == 0 && !lenient {
		errs = append(errs, field.Required(root.Child("cmd"), ""))
	}
	if pi.Img == "" {
		errs = append(errs, field.Required(root.Child("img"), ""))
	}
	if pi.InitSize == nil {
		errs = append(errs, field.Required(root.Child("init_size"), ""))
	} else if *pi.InitSize <= 0 {
		errs = append(errs, field.Invalid(root.Child("init_size"), *pi.InitSize, "should be greater than 0"))
	}
	if pi.RedisWorkload == "" {
		errs = append(errs, field.Required(root.Child("redis_workload"), "URL of the workload, one item per line"))
	}
	oneOf(root.Child("worker_protocol"), pi.WorkerProtocol, []string{schemas.ProtocolRedis, schemas.ProtocolNATS}, false)
	oneOf(root.Child("control_plugin"), pi.ControlPlugin, asperathosControlPlugins, true)
	oneOf(root.Child("monitor_plugin"), pi.MonitorPlugin, asperathosMonitorPlugins, true)
	if pi.EnableVisualizer != nil && *pi.EnableVisualizer {
		oneOf(root.Child("visualizer_plugin"), pi.VisualizerPlugin, asperathosVisualizerPlugins, true)
		if pi.VisualizerInfo == nil {
			errs = append(errs, field.Required(root.Child("visualizer_info"), "enable_visualizer needs visualizer_info"))
		}
	} else {
		oneOf(root.Child("visualizer_plugin"), pi.VisualizerPlugin, asperathosVisualizerPlugins, false)
	}
	mp := root.Child("monitor_info")
	switch {
	case pi.MonitorInfo == nil:
		errs = append(errs, field.Required(mp, ""))
	case pi.MonitorInfo.ExpectedTime == nil:
		errs = append(errs, field.Required(mp.Child("expected_time"), "the deadline in seconds"))
	case *pi.MonitorInfo.ExpectedTime <= 0:
		errs = append(errs, field.Invalid(mp.Child("expected_time"), *pi.MonitorInfo.ExpectedTime, "must be greater than 0"))
	}
	if pi.MonitorPlugin == "kubejobs_cost" && pi.MonitorInfo != nil && (pi.MonitorInfo.ClusterInfoURL == "" || pi.MonitorInfo.DesiredCost == nil) {
		errs = append(errs, field.Required(mp.Child("desired_cost"), "kubejobs_cost needs cluster_info_url and desired_cost"))
	}
	cp := root.Child("control_parameters")
	c := pi.ControlParameters
	if c == nil {
		errs = append(errs, field.Required(cp, ""))
		c = &controlParameters{}
	}
	strategy, unscaled := c.ScheduleStrategy, false
	if strategy == "" {
		strategy = "default" // Asperathos' controller would refuse the job and run it unscaled
		unscaled = lenient
	}
	oneOf(cp.Child("schedule_strategy"), strategy, asperathosStrategies, true)
	oneOf(cp.Child("actuator"), c.Actuator, asperathosActuators, false)
	oneOf(cp.Child("metric_source"), c.MetricSource, asperathosMetricSources, false)
	if c.MinRep == nil {
		errs = append(errs, field.Required(cp.Child("min_rep"), ""))
	} else if *c.MinRep < 1 {
		errs = append(errs, field.Invalid(cp.Child("min_rep"), *c.MinRep, "must be greater than 0"))
	}
	if c.MaxRep == nil {
		errs = append(errs, field.Required(cp.Child("max_rep"), ""))
	} else if c.MinRep != nil && *c.MaxRep < *c.MinRep {
		errs = append(errs, field.Invalid(cp.Child("max_rep"), *c.MaxRep, `must be greater or equal than "min_rep"`))
	}
	if c.CheckInterval != nil && *c.CheckInterval < 1 {
		errs = append(errs, field.Invalid(cp.Child("check_interval"), *c.CheckInterval, "must be at least 1 second"))
	}
	if strategy == "pid" {
		h := c.HeuristicOptions
		if h == nil || h.ProportionalGain == nil || h.DerivativeGain == nil || h.IntegralGain == nil {
			errs = append(errs, field.Required(cp.Child("heuristic_options"), "pid needs proportional_gain, derivative_gain and integral_gain"))
		}
	}
	if pi.JobResourcesLifetime != nil && *pi.JobResourcesLifetime < 0 {
		errs = append(errs, field.Invalid(root.Child("job_resources_lifetime"), *pi.JobResourcesLifetime, "must not be negative"))
	}
	for _, s := range []struct {
		p     *field.Path
		n     *int
		limit time.Duration
	}{{mp.Child("expected_time"), expectedTime(pi), math.MaxInt64},
		{cp.Child("check_interval"), c.CheckInterval, schemas.MaxInterval},
		{root.Child("job_resources_lifetime"), pi.JobResourcesLifetime, math.MaxInt64},
		{root.Child("termination_grace_period_seconds"), pi.TerminationGracePeriodSeconds, schemas.MaxInterval}} {
		// Checked here, in seconds, before they become durations (more
		// would overflow one), and with the rest of the document.
		if max := int(s.limit / time.Second); s.n != nil && *s.n > max {
			errs = append(errs, field.Invalid(s.p, *s.n, fmt.Sprintf("must be at most %d seconds", max)))
		}
	}
	if r := pi.K8sResourcesControl; r != nil && (r.Limits == nil || r.Requests == nil) {
		errs = append(errs, field.Required(root.Child("k8s_resources_control"), "needs both limits and requests"))
	}
	if len(errs) > 0 {
		return schemas.JobSpec{}, nil, errs
	}

	cparams := controllerParams{ActuationSize: c.ActuationSize, TriggerUp: c.TriggerUp, TriggerDown: c.TriggerDown}
	if strategy == "pid" { // gains kept alongside the default strategy (radiomics does) are not its settings
		cparams = controllerParams{HeuristicOptions: c.HeuristicOptions}
	}
	params, _ := json.Marshal(cparams)
	spec := schemas.JobSpec{
		Mode:     schemas.Batch,
		Deadline: schemas.Deadline{After: schemas.Duration(time.Duration(*pi.MonitorInfo.ExpectedTime) * time.Second)},
		Workload: schemas.Workload{URL: pi.RedisWorkload},
		Worker: schemas.WorkerSpec{Image: pi.Img, Command: pi.Cmd, Protocol: cmp.Or(pi.WorkerProtocol, schemas.ProtocolRedis), Env: map[string]string{},
			ImagePullSecrets: pi.Secrets,
			// Asperathos' pods ran as their image's user, on its own filesystem.
			Security: &schemas.WorkerSecurity{ImageUser: true, WritableRoot: true}},
		Replicas:   schemas.Replicas{Min: *c.MinRep, Max: *c.MaxRep, Initial: *pi.InitSize},
		Controller: schemas.ControllerSpec{Name: strategy, Params: params},
		Actuator:   schemas.ActuatorSpec{Cluster: pi.ClusterName},
		Labels:     map[string]string{labelMonitorPlugin: pi.MonitorPlugin},
	}
	if pi.ClusterName != "" {
		// A registered cluster is a Kubernetes cluster: the payload runs
		// there, as Asperathos ran it, and not on this host.
		spec.Actuator.Name = schemas.KubernetesActuator
	}
	if spec.Replicas.Initial > spec.Replicas.Max {
		spec.Replicas.Max = spec.Replicas.Initial // Asperathos starts init_size pods whatever max_rep says
	}
	if lenient && spec.Replicas.Initial < spec.Replicas.Min {
		warnings = append(warnings, fmt.Sprintf("plugin_info.init_size %d is below control_parameters.min_rep: raised to %d",
			spec.Replicas.Initial, spec.Replicas.Min))
		spec.Replicas.Initial = spec.Replicas.Min
	}
	if len(pi.Cmd) == 0 {
		warnings = append(warnings, "plugin_info.cmd is empty: the workers run the image's entrypoint")
	}
	if unscaled {
		n := spec.Replicas.Initial
		spec.Replicas.Min, spec.Replicas.Max = n, n
		warnings = append(warnings, fmt.Sprintf("control_parameters.schedule_strategy is missing: the job runs unscaled at %d replicas, as Asperathos ran it", n))
	}
	if c.CheckInterval != nil {
		spec.Controller.CheckInterval = schemas.Duration(time.Duration(*c.CheckInterval) * time.Second)
	}
	for k, v := range pi.EnvVars {
		spec.Worker.Env[k] = v
	}
	if pi.ConfigID != nil {
		spec.Worker.Env["SCONE_CONFIG_ID"] = fmt.Sprint(pi.ConfigID)
	}
	if pi.JobResourcesLifetime != nil {
		spec.ResourcesLifetime = schemas.Duration(time.Duration(*pi.JobResourcesLifetime) * time.Second)
	}
	if pi.TerminationGracePeriodSeconds != nil {
		spec.Worker.TerminationGrace = schemas.Duration(time.Duration(*pi.TerminationGracePeriodSeconds) * time.Second)
	}
	if len(pi.Selectors) > 0 {
		spec.Worker.NodeSelector = map[string]string{}
		for _, s := range pi.Selectors {
			spec.Worker.NodeSelector[strings.ToLower(fmt.Sprint(s.Key))] = fmt.Sprint(s.Value)
		}
	}
	if r := pi.K8sResourcesControl; r != nil {
		spec.Worker.Resources = &schemas.Resources{Limits: stringMap(r.Limits), Requests: stringMap(r.Requests)}
	}
	if pi.EnableVisualizer != nil && *pi.EnableVisualizer {
		spec.Labels["asperathos/visualizer"] = pi.VisualizerPlugin
	}
	if pi.MonitorPlugin == "kubejobs_cost" { // priced at submission: see Manager.price
		spec.Cost = &schemas.CostSpec{Desired: pi.MonitorInfo.DesiredCost}
		spec.Labels[labelClusterInfo] = pi.MonitorInfo.ClusterInfoURL
	}
	return spec, warnings, nil
}

// labelMonitorPlugin keeps the monitor plugin an Asperathos job named.
const labelMonitorPlugin = "asperathos/monitor_plugin"

// labelClusterInfo keeps the URL a kubejobs_cost job's prices come from.
const labelClusterInfo = "asperathos/cluster_info_url"

// price reads the prices of a kubejobs_cost job from its cluster_info_url,
// {"cpu_price": …, "memory_price": …}, as Asperathos' monitor did, but once,
// at submission: the job is refused (400) when the URL does not answer them.
func (m *Stage) price(ctx context.Context, spec *schemas.JobSpec) *field.Error {
	url := spec.Labels[labelClusterInfo]
	if url == "" || spec.Cost == nil {
		return nil
	}
	p := field.NewPath("plugin_info", "monitor_info", "cluster_info_url")
	data, ferr := m.fetch(ctx, url, p)
	if ferr != nil {
		return ferr
	}
	var prices struct {
		CPU    *float64 `json:"cpu_price"`
		Memory *float64 `json:"memory_price"`
	}
	if err := json.Unmarshal(data, &prices); err != nil || prices.CPU == nil || prices.Memory == nil {
		return field.Invalid(p, url, `must answer {"cpu_price": …, "memory_price": …}`)
	}
	spec.Cost.CPUPrice, spec.Cost.MemoryPrice = *prices.CPU, *prices.Memory
	if errs := spec.Cost.Validate(p); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func expectedTime(pi *pluginInfo) *int {
	if pi.MonitorInfo == nil {
		return nil
	}
	return pi.MonitorInfo.ExpectedTime
}

// asperathosPaths maps Pace spec paths to the Asperathos fields they came from.
var asperathosPaths = map[string]string{
	"spec.deadline":                  "plugin_info.monitor_info.expected_time",
	"spec.workload":                  "plugin_info.redis_workload",
	"spec.workload.url":              "plugin_info.redis_workload",
	"spec.replicas.min":              "plugin_info.control_parameters.min_rep",
	"spec.replicas.max":              "plugin_info.control_parameters.max_rep",
	"spec.replicas.initial":          "plugin_info.init_size",
	"spec.controller.name":           "plugin_info.control_parameters.schedule_strategy",
	"spec.controller.check_interval": "plugin_info.control_parameters.check_interval",
	"spec.worker.image":              "plugin_info.img",
	"spec.actuator.cluster":          "plugin_info.cluster_name",
	"spec.resources_lifetime":        "plugin_info.job_resources_lifetime",
	"spec.worker.termination_grace":  "plugin_info.termination_grace_period_seconds",
}

// inDocument names errs' fields as the submitted document does: those of
// an Asperathos submission by its own paths (asperathosPaths, whose paths
// are never keys, so naming twice changes nothing).
func (sub *submission) inDocument(errs field.ErrorList) field.ErrorList {
	if sub.format == FormatAsperathos {
		for _, e := range errs {
			if p, ok := asperathosPaths[e.Field]; ok {
				e.Field = p
			}
		}
	}
	return errs
}

func stringMap(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}
