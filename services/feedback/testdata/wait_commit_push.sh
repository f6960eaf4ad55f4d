#!/bin/sh
# Scripted agent: waits until $RECORD_DIR/release-$INSTANCE exists (at most
# about 20 s), then edits, commits and pushes. Tests hold an instance's
# agent mid-attempt with it.
set -eu
. "$(dirname "$0")/record.sh"
record_start
wait_release
edit_and_commit
git push -q 2>/dev/null || true # refused: prloop pushes
record_end
