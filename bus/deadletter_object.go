package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/pace-platform/pace/schemas"
)

// lettersBucket is the object store that keeps the bodies of malformed
// messages whose dead letters would not fit the bus's max_payload: base64
// makes a body a third larger, so a message over about 750 KiB cannot be
// kept in its letter. Each object belongs to one letter, which names it
// (schemas.DeadLetter.RawObject).
const lettersBucket = schemas.BucketDeadLetters

// letterObjectSweep is how often DeadLetters deletes the objects no letter
// names, and how old those must be.
const letterObjectSweep = time.Hour

// letterObjectTimeout bounds writing an object of the dead-letter object
// store, whatever the caller's context (see putLetterObject).
const letterObjectTimeout = 10 * time.Second

// objectStores returns the desired configuration of every object store;
// Replicas is set by Provision.
func (c *Client) objectStores(l Limits) []jetstream.ObjectStoreConfig {
	return []jetstream.ObjectStoreConfig{{Bucket: c.prefix.Bucket(lettersBucket),
		Description: "bodies of malformed messages too large for their dead letters", Storage: jetstream.FileStorage,
		MaxBytes: l.bucketBytes(lettersBucket)}}
}

// ensureObjectStore is ensureStream for an object store.
func (c *Client) ensureObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig, old *jetstream.StreamConfig) error {
	if covers(old, &jetstream.StreamConfig{Description: cfg.Description, Storage: cfg.Storage, Replicas: cfg.Replicas,
		MaxBytes: cfg.MaxBytes, Discard: jetstream.DiscardNew}) {
		return nil
	}
	if _, err := c.js.CreateOrUpdateObjectStore(ctx, cfg); err != nil {
		return fmt.Errorf("provision object store %s: %w", cfg.Bucket, err)
	}
	after, err := c.js.Stream(ctx, "OBJ_"+cfg.Bucket)
	if err != nil {
		return fmt.Errorf("provision object store %s: %w", cfg.Bucket, err)
	}
	c.logDrift("object store", cfg.Bucket, old, &after.CachedInfo().Config)
	return nil
}

func objectStoreStreams(cfgs []jetstream.ObjectStoreConfig) []string {
	names := make([]string, len(cfgs))
	for i, cfg := range cfgs {
		names[i] = "OBJ_" + cfg.Bucket
	}
	return names
}

// letterObjects binds the dead-letter object store.
func (c *Client) letterObjects(ctx context.Context) (jetstream.ObjectStore, error) {
	name := c.prefix.Bucket(lettersBucket)
	obs, err := c.js.ObjectStore(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("object store %s (was the bus provisioned?): %w", name, err)
	}
	return obs, nil
}

// publishLetterObject publishes d, whose body is too large to travel in
// it, on subject in two writes: first d.Raw as an object of the
// dead-letter object store, then a copy of d that names that object
// (RawObject, RawSize) in place of Raw. A letter thus never names a
// missing object; an object without a letter (the second write failed, or
// the process died between the two) is harmless, and Sweep
// deletes it later.
// With a key, the object is subject, "/" and the SHA-256 of key and body
// in hex: every retry of the letter writes the same object again, in
// place, and when the bus drops the letter as a duplicate, the object is
// the one the kept letter names. The body is hashed too so that a key
// used again for another message (its stream was recreated, its sequences
// start over) names another object, not the older letter's. Without a
// key, the object is subject, "/" and a NUID, the letter's own.
func (c *Client) publishLetterObject(ctx context.Context, subject string, d *schemas.DeadLetter, key string) (duplicate bool, err error) {
	obs, err := c.letterObjects(ctx)
	if err != nil {
		return false, err
	}
	ref := *d
	ref.Raw, ref.RawObject, ref.RawSize = nil, letterObjectName(subject, key, d.Raw), int64(len(d.Raw))
	if ref.Reason == schemas.RefusedItem {
		ref.Payload = "" // part of the body, which would not fit twice
	}
	if err := c.putLetterObject(ctx, obs, ref.RawObject, d); err != nil {
		return false, fmt.Errorf("keep the %d-byte body of %s's dead letter in %s: %w", len(d.Raw), d.Job, c.prefix.Bucket(lettersBucket), err)
	}
	return c.publishLetter(ctx, subject, &ref, key)
}

// putLetterObject writes d.Raw as object name of obs. Once started, the
// write is not cut short by ctx, only by letterObjectTimeout: nats.go
// writes an object in chunks and, when a write fails, purges the chunks
// written under the same context, so a write ended by its context leaves
// chunks that belong to no object, which List does not show and the sweep
// cannot delete.
func (c *Client) putLetterObject(ctx context.Context, obs jetstream.ObjectStore, name string, d *schemas.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), letterObjectTimeout)
	defer cancel()
	_, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Description: "body of a " + string(d.Reason) + " message on " + d.Subject},
		bytes.NewReader(d.Raw))
	return err
}

// letterObjectName names the object that keeps body for the letter
// published on subject with key (see publishLetterObject).
func letterObjectName(subject, key string, body []byte) string {
	if key == "" {
		return subject + "/" + nuid.Next()
	}
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(body)
	return subject + "/" + hex.EncodeToString(h.Sum(nil))
}

// deleteObject deletes object name of the dead-letter object store obs; one
// already gone is no error.
func (c *Client) deleteObject(ctx context.Context, obs jetstream.ObjectStore, name string) error {
	if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete object %s of %s: %w", name, c.prefix.Bucket(lettersBucket), err)
	}
	return nil
}

// Body returns the message d keeps, byte for byte: a malformed
// message's body, from Raw or, for one too large to travel in its letter,
// from the dead-letter object store (RawObject); else the item's payload
// (reason max_deliveries, and version 1 letters of malformed messages).
// It fails when the object cannot be read, or is not RawSize bytes long.
func (box Letters) Body(ctx context.Context, d *schemas.DeadLetter) ([]byte, error) {
	c := box.c
	switch {
	case d.RawObject != "":
		obs, err := c.letterObjects(ctx)
		if err != nil {
			return nil, err
		}
		body, err := obs.GetBytes(ctx, d.RawObject)
		if err != nil {
			return nil, fmt.Errorf("body of %s's dead letter, object %s of %s: %w", d.Job, d.RawObject, c.prefix.Bucket(lettersBucket), err)
		}
		if int64(len(body)) != d.RawSize {
			return nil, fmt.Errorf("%w: body of %s's dead letter, object %s of %s: %d bytes, the letter says %d",
				ErrMalformed, d.Job, d.RawObject, c.prefix.Bucket(lettersBucket), len(body), d.RawSize)
		}
		return body, nil
	case d.Raw != nil:
		return d.Raw, nil
	}
	return []byte(d.Payload), nil
}

// deleteLetterObject deletes the object letter d names, if any.
func (c *Client) deleteLetterObject(ctx context.Context, d *schemas.DeadLetter) error {
	if d.RawObject == "" {
		return nil
	}
	obs, err := c.letterObjects(ctx)
	if err != nil {
		return err
	}
	return c.deleteObject(ctx, obs, d.RawObject)
}

// listLetterObjects binds the dead-letter object store and lists its
// objects (none is no error).
func (c *Client) listLetterObjects(ctx context.Context) (jetstream.ObjectStore, []*jetstream.ObjectInfo, error) {
	obs, err := c.letterObjects(ctx)
	if err != nil {
		return nil, nil, err
	}
	objects, err := obs.List(ctx)
	switch {
	case errors.Is(err, jetstream.ErrNoObjectsFound):
		return obs, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("list %s: %w", c.prefix.Bucket(lettersBucket), err)
	}
	return obs, objects, nil
}

// purgeLetterObjects deletes the objects of job's dead letters, once the
// letters are gone: those whose names start with one of its letter
// subjects.
func (c *Client) purgeLetterObjects(ctx context.Context, job string) error {
	obs, objects, err := c.listLetterObjects(ctx)
	if err != nil {
		return err
	}
	dead, set := c.prefix.Dead(job)+"/", c.prefix.Metrics(job, schemas.DeadMetrics)+"/"
	for _, o := range objects {
		if strings.HasPrefix(o.Name, dead) || strings.HasPrefix(o.Name, set) {
			if err := c.deleteObject(ctx, obs, o.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Sweep deletes the objects of the dead-letter object store
// that no stored letter names, and returns how many it deleted. Such an
// object is harmless but takes room: the letter was never stored (the
// process died, or the bus failed, between the object and the letter),
// it expired with PACE_METRICS's max age, or deleting the object after
// its letter failed. Objects younger than grace are left alone, their
// letters possibly on their way. The letters are read only when some
// object is old enough. A stored message among the letters that cannot be
// read (a newer version's letter, which may name an object, or junk)
// spares the objects under its subject ("<subject>/...", where its object
// would be) and no others; the sweep then also returns an error wrapping
// ErrMalformed that names it. DeadLetters sweeps every hour, with a grace
// of an hour.
func (box Letters) Sweep(ctx context.Context, grace time.Duration) (int, error) {
	c := box.c
	obs, objects, err := c.listLetterObjects(ctx)
	if err != nil {
		return 0, err
	}
	objects = slices.DeleteFunc(objects, func(o *jetstream.ObjectInfo) bool { return c.clk.Now().Sub(o.ModTime) < grace })
	if len(objects) == 0 {
		return 0, nil
	}
	named := map[string]bool{}
	var spared []string // subjects of unreadable letters, each with a trailing "/"
	var unreadable []error
	for _, store := range []LetterStore{DeadItems, DeadMessages} {
		skip := func(subject string, seq uint64, err error) {
			spared = append(spared, subject+"/")
			unreadable = append(unreadable, fmt.Errorf("%s letter %d on %s (objects %s* spared): %w",
				store, seq, subject, subject+"/", err))
		}
		for l, err := range c.letters(ctx, store, "*", false, skip) {
			if err != nil {
				return 0, fmt.Errorf("sweep %s: %w", c.prefix.Bucket(lettersBucket), err)
			}
			named[l.RawObject] = true
		}
	}
	deleted := 0
	for _, o := range objects {
		if named[o.Name] || slices.ContainsFunc(spared, func(p string) bool { return strings.HasPrefix(o.Name, p) }) {
			continue
		}
		if err := c.deleteObject(ctx, obs, o.Name); err != nil {
			return deleted, err
		}
		deleted++
	}
	if len(unreadable) > 0 {
		return deleted, fmt.Errorf("sweep %s: %w", c.prefix.Bucket(lettersBucket), errors.Join(unreadable...))
	}
	return deleted, nil
}

// sweepLetterObjects is Letters.Sweep as Letters.Move runs it: logged,
// and tried again at the next sweep when it fails.
func (c *Client) sweepLetterObjects(ctx context.Context) {
	n, err := c.Letters().Sweep(ctx, letterObjectSweep)
	if n > 0 {
		c.log.Info("dead-letter objects without letters deleted", "objects", n)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("dead-letter objects not all swept, will retry", "err", err, "retry_after", letterObjectSweep)
	}
}
