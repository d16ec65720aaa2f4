#!/bin/bash
# The worker program of the Asperathos payloads (their cmd is
# ["/bin/bash", "wrapper.sh"]) on Pace's local actuator, which starts it with
# PACE_NATS_URL and PACE_JOB set: 'pace worker' speaks the queue protocol and
# runs the per-item command (the item on stdin, the result on stdout).
exec pace worker "$PACE_JOB" --nats "$PACE_NATS_URL" --exec 'tr a-z A-Z'
