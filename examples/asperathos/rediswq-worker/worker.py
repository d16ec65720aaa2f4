#!/usr/bin/env python3
"""A worker written for Asperathos, unchanged: it takes its job's items from
Redis with the rediswq protocol, the way Asperathos' sample and radiomics
workers do. On Pace it talks to the Redis front (docs/asperathos.md), which
Pace points it at through REDIS_HOST, REDIS_PORT and REDIS_QUEUE.

Each item is processed by upper-casing it, after WORK_SECONDS of "work";
items starting with "bad" fail: the worker pushes an error to <queue>:errors.

  REDIS_HOST=127.0.0.1 REDIS_PORT=6380 REDIS_QUEUE=<job> python3 worker.py

Needs python3-redis (Debian) or `pip install redis`.
"""
import hashlib
import os
import time
import uuid

import redis


class WorkQueue:
    """A Redis list as a work queue with leases (the rediswq protocol)."""

    def __init__(self, name, **redis_args):
        self.db = redis.StrictRedis(**redis_args)
        self.session = str(uuid.uuid4())
        self.main = name
        self.processing = name + ":processing"
        self.lease_prefix = name + ":leased_by_session:"

    def lease_key(self, item):
        return self.lease_prefix + hashlib.sha224(item).hexdigest()

    def empty(self):
        return self.db.llen(self.main) == 0 and self.db.llen(self.processing) == 0

    def lease(self, lease_secs, timeout):
        item = self.db.brpoplpush(self.main, self.processing, timeout=timeout)
        if item is not None:
            self.db.setex(self.lease_key(item), lease_secs, self.session)
        return item

    def complete(self, item):
        self.db.lrem(self.processing, 0, item)
        self.db.delete(self.lease_key(item))

    def requeue_expired(self):
        for item in self.db.lrange(self.processing, 0, -1):
            if not self.db.exists(self.lease_key(item)):
                pipe = self.db.pipeline()  # MULTI ... EXEC
                pipe.rpush(self.main, item)
                pipe.lrem(self.processing, 0, item)
                pipe.execute()


def main():
    queue = WorkQueue(os.environ.get("REDIS_QUEUE", "job"),
                      host=os.environ.get("REDIS_HOST", "localhost"),
                      port=int(os.environ.get("REDIS_PORT", "6379")))
    lease_secs = int(os.environ.get("ITEM_LEASE_SECS", "10"))
    work = float(os.environ.get("WORK_SECONDS", "0"))
    done = 0
    while not queue.empty():
        item = queue.lease(lease_secs, timeout=2)
        if item is None:
            queue.requeue_expired()
            continue
        time.sleep(work)
        if item.startswith(b"bad"):
            queue.db.rpush(queue.main + ":errors", b"cannot process " + item)
        else:
            queue.db.rpush(queue.main + ":results", item.upper())
        queue.complete(item)
        done += 1
    print("queue empty, %d items done" % done, flush=True)


if __name__ == "__main__":
    main()
