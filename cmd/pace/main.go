// Command pace runs and drives the Pace platform: `pace up` starts it on one
// machine, the other commands push work, run workers and read results.
package main

import (
	"context"
	"os"

	"github.com/pace-platform/pace/stages/gate/targets/local"
)

func main() {
	local.RunSandboxInit() // a sandboxed local worker's first process is this binary
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
