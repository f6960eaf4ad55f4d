#!/bin/sh
# Scripted agent: edits, commits and tries a plain `git push`, as an agent
# that ignores its prompt would. It has no credentials, so the push must
# fail; $RECORD_DIR/pushed.<pid> records one that did not. $AGENT_SLEEP
# (seconds) keeps it running a while, for tests that watch it run.
set -eu
. "$(dirname "$0")/record.sh"
record_start
sleep "${AGENT_SLEEP:-0}"
edit_and_commit
if git push -q 2>/dev/null; then touch "$RECORD_DIR/pushed.$$"; fi
record_end
