#!/usr/bin/env python3
"""An Asperathos client's flow, as its integration tests drive a manager:
submit a kubejobs payload, poll its status, wait for its visualizer URL, stop
it, read its report, delete it. It speaks Asperathos' API with the standard
library alone and fails on any HTTP error, as a script calling
raise_for_status() does. On Pace, point it at the Asperathos routes:

  python3 client_flow.py http://127.0.0.1:8080/asperathos payload.json

The visualizer's URL is the manager's (Pace serves /visualizing/<id> there).
"""
import json
import sys
import time
import urllib.error
import urllib.request


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:  # raises on 4xx and 5xx
        text = resp.read().decode()
        return json.loads(text) if text.strip() else None


def wait(what, check, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    sys.exit("timed out waiting for " + what)


def main():
    manager, payload_file = sys.argv[1], sys.argv[2]
    visualizer = sys.argv[3] if len(sys.argv) > 3 else manager
    with open(payload_file) as f:
        payload = json.load(f)

    job_id = call("POST", manager + "/submissions", payload)["job_id"]
    print("submitted", job_id, flush=True)
    wait("the job to run",
         lambda: call("GET", manager + "/submissions/" + job_id)["status"] == "ongoing")
    url = wait("the visualizer URL", lambda: (
        lambda u: u if u.startswith("http") else None)(
        call("GET", visualizer + "/visualizing/" + job_id)["url"]))
    print("visualizer", url, flush=True)

    call("PUT", manager + "/submissions/" + job_id + "/stop", {"enable_auth": False})
    status = wait("the job to stop", lambda: (
        lambda s: s if s in ("stopped", "completed") else None)(
        call("GET", manager + "/submissions/" + job_id)["status"]))
    print("status", status, flush=True)

    report = call("GET", manager + "/submissions/" + job_id + "/report")
    print("report", len(report), "samples", flush=True)
    errors = call("GET", manager + "/submissions/" + job_id + "/errors")
    print("errors", errors, flush=True)

    call("DELETE", manager + "/submissions/" + job_id, {"enable_auth": False})
    try:
        call("GET", manager + "/submissions/" + job_id)
        sys.exit("the deleted job is still there")
    except urllib.error.HTTPError as e:
        if e.code != 400:
            sys.exit("a deleted job answers %d, Asperathos answered 400" % e.code)
    print("deleted", flush=True)


if __name__ == "__main__":
    main()
