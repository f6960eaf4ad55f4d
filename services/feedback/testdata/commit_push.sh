#!/bin/sh
# Scripted agent: edits, commits and pushes with a plain `git push`, which
# works because prloop's checkout tracks the PR's branch. $AGENT_SLEEP
# (seconds) keeps it running a while, for tests that watch it run.
set -eu
. "$(dirname "$0")/record.sh"
record_start
sleep "${AGENT_SLEEP:-0}"
edit_and_commit
git push -q
record_end
