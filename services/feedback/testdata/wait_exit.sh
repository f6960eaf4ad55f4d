#!/bin/sh
# Scripted agent: waits until $RECORD_DIR/release-$INSTANCE exists (at most
# about 20 s), then exits with $EXIT (default 0) without changing anything.
# Tests push to the PR as someone else while it runs.
set -eu
. "$(dirname "$0")/record.sh"
record_start
wait_release
record_end
exit "${EXIT:-0}"
