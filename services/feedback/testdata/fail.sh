#!/bin/sh
# Scripted agent: gives up (exits non-zero) without touching anything.
set -eu
. "$(dirname "$0")/record.sh"
record_start
record_end
exit 3
