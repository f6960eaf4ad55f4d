#!/bin/sh
# Scripted agent: writes half of its fix (a modified main.go and a new
# file, uncommitted), says so in $RECORD_DIR/writing.<id>, waits until
# $RECORD_DIR/release-$INSTANCE exists (at most about 20 s), and writes
# the rest. Every line it writes names its run, so that a test sees whose
# work was pushed.
set -eu
. "$(dirname "$0")/record.sh"
record_start
printf '// half-written by %s\n' "$run_id" >>main.go
printf 'notes of %s\n' "$run_id" >"notes-$run_id.txt"
touch "$RECORD_DIR/writing.$run_id"
i=0
while [ ! -e "$RECORD_DIR/release-${INSTANCE:-none}" ] && [ $i -lt 400 ]; do
	sleep 0.05
	i=$((i + 1))
done
printf '// finished by %s\n' "$run_id" >>main.go
record_end
