#!/bin/sh
# Scripted agent: waits (at most about 5 s) until an agent for another PR is
# running too, so that agents of different PRs provably overlap, then edits,
# commits and pushes.
set -eu
. "$(dirname "$0")/record.sh"
record_start
i=0
while [ "$(ls "$RECORD_DIR" | grep -c '^active-')" -lt 2 ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
sleep 0.2
edit_and_commit
git push -q 2>/dev/null || true # refused: prloop pushes
record_end
