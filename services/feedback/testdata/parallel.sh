#!/bin/sh
# Scripted agent: waits (at most 5 s by the clock) until an agent for
# another PR is running too, so that agents of different PRs provably
# overlap, then edits, commits and pushes. The bound is wall time, not a
# count of rounds: on a busy machine each round's processes take long
# enough that 100 rounds outlasted the agent timeout, and an agent that
# started after the others had ended timed out on every retry.
set -eu
. "$(dirname "$0")/record.sh"
record_start
until=$(($(date +%s) + 5))
while [ "$(ls "$RECORD_DIR" | grep -c '^active-')" -lt 2 ] && [ "$(date +%s)" -lt "$until" ]; do
	sleep 0.05
done
sleep 0.2
edit_and_commit
git push -q 2>/dev/null || true # refused: prloop pushes
record_end
