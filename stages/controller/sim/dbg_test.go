package sim_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/pace-platform/pace/stages/controller"
	"github.com/pace-platform/pace/stages/controller/sim"
)

func TestDebug(t *testing.T) {
	s, err := sim.Load("../../../examples/scenarios/" + os.Getenv("SC"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Run(s, controller.Builtin(), "deadline")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Decisions {
		fmt.Printf("%6.1f %2d %s\n", d.T, d.Replicas, d.Reason)
	}
	fmt.Println(r.Finish, r.ReplicaSeconds, r.Oracle)
}
