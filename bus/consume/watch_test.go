package consume_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/consume"
)

// bucket makes a key-value bucket holding a=1 on a real embedded server and
// returns it with its connection.
func bucket(t *testing.T) (*nats.Conn, jetstream.KeyValue) {
	t.Helper()
	nc, js := bustest.Raw(t, "", bustest.Server(t).InProcess())
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	return nc, kv
}

func TestWatchYieldsStoredValuesThenUpdates(t *testing.T) {
	_, kv := bucket(t)
	var got []string
	for e, err := range consume.Watch(t.Context(), kv, ">") {
		if err != nil {
			t.Fatal(err)
		}
		if e == nil { // caught up: change the bucket
			got = append(got, "caught up")
			if _, err := kv.Put(t.Context(), "b", []byte("2")); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got = append(got, e.Key()+"="+string(e.Value()))
		if e.Key() == "b" {
			break // breaking out ends the watch
		}
	}
	if want := "a=1,caught up,b=2"; strings.Join(got, ",") != want {
		t.Fatalf("watch yielded %s, want %s", strings.Join(got, ","), want)
	}
}

func TestAWatchThatEndsFirstIsAnError(t *testing.T) {
	nc, kv := bucket(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var last error
	for e, err := range consume.Watch(ctx, kv, ">") {
		if e == nil && err == nil {
			nc.Close() // the connection closes under the watch
		}
		last = err
	}
	if !errors.Is(last, consume.ErrWatchEnded) || ctx.Err() != nil {
		t.Fatalf("watch whose connection closed: last error %v, context %v; want ErrWatchEnded first", last, ctx.Err())
	}
}

func TestUpdatesCloseWhenTheContextEnds(t *testing.T) {
	_, kv := bucket(t)
	ctx, cancel := context.WithCancel(t.Context())
	updates := consume.Updates(ctx, kv, "a")
	if u := <-updates; u.Err != nil || u.Entry == nil || string(u.Entry.Value()) != "1" {
		t.Fatalf("first update %+v, want a=1", u)
	}
	if u := <-updates; u.Err != nil || u.Entry != nil {
		t.Fatalf("second update %+v, want caught up (no entry, no error)", u)
	}
	cancel()
	for u := range updates { // closes once the watch has ended
		if u.Err != nil {
			t.Fatalf("update after the context ended: %v, want none with an error", u.Err)
		}
	}
}

// TestAWatchLeavesNoGoroutine: a watch that ends before its context (here
// its connection closes) leaves no goroutine behind: nats.go keeps one per
// watch until the watch's context ends, Stop or not.
func TestAWatchLeavesNoGoroutine(t *testing.T) {
	nc, kv := bucket(t)
	before := goleak.IgnoreCurrent()
	var last error
	for e, err := range consume.Watch(t.Context(), kv, ">") {
		if e == nil && err == nil { // caught up
			nc.Close()
		}
		last = err
	}
	if !errors.Is(last, consume.ErrWatchEnded) {
		t.Fatalf("watch ended with %v, want ErrWatchEnded", last)
	}
	bustest.Eventually(t, 10*time.Second, "the watch's goroutines end", func() bool { return goleak.Find(before) == nil })
}
