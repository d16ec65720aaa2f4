#!/usr/bin/env python3
"""A worker written for Asperathos, unchanged: it takes its job's items from
Redis through the rediswq library (rediswq.py beside it, the published
library's commands), the way Asperathos' sample and radiomics workers and
the Kubernetes documentation's work-queue example do. On Pace it talks to
the Redis front (docs/asperathos.md), which Pace points it at through
REDIS_HOST, REDIS_PORT and REDIS_QUEUE.

Each item is processed by upper-casing it, after WORK_SECONDS of "work";
items starting with "bad" fail: the worker pushes an error to <queue>:errors.
With GIVE_BACK=1 it gives each item back once (rediswq's unlease) before
doing it.

  REDIS_HOST=127.0.0.1 REDIS_PORT=6380 REDIS_QUEUE=<job> python3 worker.py

Needs python3-redis (Debian) or `pip install redis`.
"""
import os
import time

import rediswq


def main():
    queue = rediswq.RedisWQ(name=os.environ.get("REDIS_QUEUE", "job"),
                            host=os.environ.get("REDIS_HOST", "localhost"),
                            port=int(os.environ.get("REDIS_PORT", "6379")))
    lease_secs = int(os.environ.get("ITEM_LEASE_SECS", "10"))
    work = float(os.environ.get("WORK_SECONDS", "0"))
    give_back = os.environ.get("GIVE_BACK") == "1"
    given = set()
    done = 0
    while not queue.empty():
        item = queue.lease(lease_secs=lease_secs, block=True, timeout=2)
        if item is None:
            queue.requeue_expired()
            continue
        if give_back and item not in given:
            given.add(item)
            queue.unlease(item)
            continue
        time.sleep(work)
        if item.startswith(b"bad"):
            queue._db.rpush(queue._main_q_key + ":errors", b"cannot process " + item)
        else:
            queue._db.rpush(queue._main_q_key + ":results", item.upper())
        queue.complete(item)
        done += 1
    print("queue empty, %d items done" % done, flush=True)


if __name__ == "__main__":
    main()
