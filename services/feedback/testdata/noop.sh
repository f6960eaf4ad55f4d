#!/bin/sh
# Scripted agent: does nothing and exits 0. No change is a failure.
set -eu
. "$(dirname "$0")/record.sh"
record_start
record_end
