#!/bin/sh
# Scripted agent: starts a child that ignores SIGTERM and leaves the
# session (setsid), named by $RECORD_DIR in its command line so that the
# test finds it among the host's processes, and waits forever. Only killing
# everything the agent started ends the child.
set -eu
. "$(dirname "$0")/record.sh"
record_start
setsid sh -c 'trap "" TERM; while :; do sleep 1; done' "hang-child $RECORD_DIR" </dev/null >/dev/null 2>&1 &
touch "$RECORD_DIR/child.started"
wait
