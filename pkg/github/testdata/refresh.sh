#!/usr/bin/env bash
# refresh.sh copies the recorded scenarios fixtures_test.go replays from the
# npm package @octokit/fixtures (scenarios/api.github.com/<scenario>/):
#
#   npm pack @octokit/fixtures@23.1.2 && tar xzf octokit-fixtures-23.1.2.tgz
#   ./refresh.sh package/scenarios/api.github.com
#
# The files are copied verbatim (see the checksums in README.md); only the
# scenarios the tests use are kept. Tests never run this script.
set -euo pipefail
src=${1:?usage: refresh.sh path/to/scenarios/api.github.com}
src=$(realpath "$src")
cd "$(dirname "$0")"
for scenario in paginate-issues errors branch-protection; do
  mkdir -p "fixtures/$scenario"
  cp "$src/$scenario/raw-fixture.json" "fixtures/$scenario/raw-fixture.json"
done
