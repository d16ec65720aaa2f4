package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/stages/gate/targets"
)

// redisFlags configure the Redis front (docs/asperathos.md), which the gate
// runs beside the workers it serves and the job views name.
type redisFlags struct {
	// listen is the front's address; podAddr is where worker pods reach it.
	listen, podAddr string
}

func (f *redisFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "redis-listen", "127.0.0.1:0", `listen address of the Redis front, where Asperathos workers read their job's queue (port 0: any free port; "" = none; docs/asperathos.md)`)
	fs.StringVar(&f.podAddr, "pod-redis-addr", "", `host:port of the Redis front that worker pods reach, e.g. pace-redis.pace.svc:6379 ("" = pods get no REDIS_HOST)`)
}

// target returns this command's instance of a registered actuation target.
func (f *stageFlags) target(d targets.Def) targets.Command {
	return instance(&f.targets, d.Name, d.New)
}

// addTargets registers the flags of every actuation target and of the
// Redis front.
func (f *stageFlags) addTargets(fs *pflag.FlagSet) {
	f.redis.add(fs)
	for _, d := range targets.Defs() {
		f.target(d).Flags(fs)
	}
}

// enabled returns the targets the flags enable, by name.
func (f *stageFlags) enabled() map[string]targets.Command {
	on := map[string]targets.Command{}
	for _, d := range targets.Defs() {
		if t := f.target(d); t.Enabled() {
			on[d.Name] = t
		}
	}
	return on
}

// validateTargets checks every target's flags; natsURL is where local
// workers reach the bus ("" : no TCP listener).
func (f *stageFlags) validateTargets(natsURL string) error {
	w := targets.Workers{NATSURL: natsURL, RedisAddr: f.redis.podAddr}
	for _, d := range targets.Defs() {
		if err := f.target(d).Validate(w); err != nil {
			return usageError("%v", err)
		}
	}
	return nil
}

// needTargets refuses a gate without any target to run workers on.
func (f *stageFlags) needTargets() error {
	if len(f.enabled()) > 0 {
		return nil
	}
	var names []string
	for _, d := range targets.Defs() {
		names = append(names, d.Name)
	}
	return usageError("the gate needs a runtime: enable a target (%s), e.g. --actuator local or --kubernetes", strings.Join(names, ", "))
}
