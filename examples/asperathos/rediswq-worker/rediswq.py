"""The rediswq work-queue API that Asperathos' worker images and the
Kubernetes documentation's "fine parallel processing using a work queue"
example use, with the same Redis commands in the same order, so that a
worker written against the published library behaves here as it does there:

  lease:     BRPOPLPUSH <q> <q>:processing <timeout>   (RPOPLPUSH without blocking)
             SETEX <q>:leased_by_session:<sha224(item)> <lease_secs> <session>
  complete:  LREM <q>:processing 0 <item>
             DEL <q>:leased_by_session:<sha224(item)> <session>   (two keys)
  unlease:   LREM, RPUSH <q> <item>, DEL   (radiomics-asperathos' give-back)
  empty:     LLEN <q> == 0 and LLEN <q>:processing == 0
"""
import hashlib
import uuid

import redis


class RedisWQ:
    def __init__(self, name, **redis_kwargs):
        self._db = redis.StrictRedis(**redis_kwargs)
        self._session = str(uuid.uuid4())
        self._main_q_key = name
        self._processing_q_key = name + ":processing"
        self._lease_key_prefix = name + ":leased_by_session:"

    def sessionID(self):
        return self._session

    def _itemkey(self, item):
        return hashlib.sha224(item).hexdigest()

    def _lease_exists(self, item):
        return self._db.exists(self._lease_key_prefix + self._itemkey(item))

    def empty(self):
        return self._db.llen(self._main_q_key) == 0 and self._db.llen(self._processing_q_key) == 0

    def lease(self, lease_secs=60, block=True, timeout=None):
        if block:
            item = self._db.brpoplpush(self._main_q_key, self._processing_q_key, timeout=timeout)
        else:
            item = self._db.rpoplpush(self._main_q_key, self._processing_q_key)
        if item:
            self._db.setex(self._lease_key_prefix + self._itemkey(item), lease_secs, self._session)
        return item

    def complete(self, value):
        self._db.lrem(self._processing_q_key, 0, value)
        self._db.delete(self._lease_key_prefix + self._itemkey(value), self._session)

    def unlease(self, value):
        self._db.lrem(self._processing_q_key, 0, value)
        self._db.rpush(self._main_q_key, value)
        self._db.delete(self._lease_key_prefix + self._itemkey(value), self._session)

    def requeue_expired(self):
        for item in self._db.lrange(self._processing_q_key, 0, -1):
            if not self._lease_exists(item):
                pipe = self._db.pipeline()  # MULTI ... EXEC
                pipe.rpush(self._main_q_key, item)
                pipe.lrem(self._processing_q_key, 0, item)
                pipe.execute()
