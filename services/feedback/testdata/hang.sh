#!/bin/sh
# Scripted agent: starts a child that ignores SIGTERM, writes the child's
# pid to $RECORD_DIR/child.pid and waits forever. Only killing the whole
# process group with SIGKILL ends the child.
set -eu
. "$(dirname "$0")/record.sh"
record_start
(trap '' TERM; exec sleep 300) &
echo $! >"$RECORD_DIR/child.pid.tmp"
mv "$RECORD_DIR/child.pid.tmp" "$RECORD_DIR/child.pid"
wait
