#!/bin/sh
# Scripted agent: edits a file and stops there; prloop must commit and push.
set -eu
. "$(dirname "$0")/record.sh"
record_start
printf '// edited, not committed\n' >>main.go
record_end
