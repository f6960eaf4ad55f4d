#!/bin/sh
# Scripted agent: edits and commits with a plain `git commit`, as a real
# coding agent does: no identity of its own, in the sandbox's empty HOME.
set -eu
. "$(dirname "$0")/record.sh"
record_start
printf '// addressed (%s)\n' "$run_id" >>main.go
git add main.go
git commit -q -m "Address review comments" 2>"$RECORD_DIR/commit-stderr.$run_id"
record_end
