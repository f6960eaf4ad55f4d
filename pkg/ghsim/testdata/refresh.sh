#!/usr/bin/env bash
# refresh.sh rebuilds rest-openapi.json from GitHub's dereferenced OpenAPI
# description (npm package @octokit/openapi, generated/api.github.com.deref.json):
#
#   npm pack @octokit/openapi@23.0.2 && tar xzf octokit-openapi-23.0.2.tgz
#   ./refresh.sh package/generated/api.github.com.deref.json
#
# It keeps the operations the simulator serves (the list below: add one
# when contract_test.go drives a new endpoint), and of each operation only
# its JSON response schemas, without prose and examples, which no test
# reads. Tests never run this script; they read its committed output.
set -euo pipefail
src=${1:?usage: refresh.sh path/to/api.github.com.deref.json}
src=$(realpath "$src")
cd "$(dirname "$0")"
jq -L . -r '
include "strip";
{
  "/rate_limit": ["get"],
  "/repos/{owner}/{repo}": ["get"],
  "/repos/{owner}/{repo}/pulls": ["get", "post"],
  "/repos/{owner}/{repo}/pulls/{pull_number}": ["get", "patch"],
  "/repos/{owner}/{repo}/pulls/comments": ["get"],
  "/repos/{owner}/{repo}/pulls/{pull_number}/comments": ["get", "post"],
  "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies": ["post"],
  "/repos/{owner}/{repo}/pulls/{pull_number}/reviews": ["get", "post"],
  "/repos/{owner}/{repo}/pulls/{pull_number}/merge": ["get", "put"],
  "/repos/{owner}/{repo}/pulls/{pull_number}/update-branch": ["put"],
  "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers": ["post"],
  "/repos/{owner}/{repo}/issues": ["get"],
  "/repos/{owner}/{repo}/issues/comments": ["get"],
  "/repos/{owner}/{repo}/issues/{issue_number}/comments": ["get", "post"],
  "/repos/{owner}/{repo}/issues/{issue_number}/reactions": ["get", "post"],
  "/repos/{owner}/{repo}/issues/{issue_number}/reactions/{reaction_id}": ["delete"],
  "/repos/{owner}/{repo}/issues/{issue_number}/labels": ["get", "post"],
  "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}": ["delete"],
  "/repos/{owner}/{repo}/commits/{ref}/status": ["get"],
  "/repos/{owner}/{repo}/commits/{ref}/check-runs": ["get"],
  "/repos/{owner}/{repo}/check-runs": ["post"],
  "/repos/{owner}/{repo}/check-runs/{check_run_id}": ["patch"],
  "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations": ["get"],
  "/repos/{owner}/{repo}/actions/jobs/{job_id}": ["get"],
  "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs": ["get"],
  "/repos/{owner}/{repo}/actions/runs/{run_id}": ["get"],
  "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs": ["get"],
  "/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs": ["post"],
  "/repos/{owner}/{repo}/collaborators/{username}/permission": ["get"],
  "/repos/{owner}/{repo}/git/refs/{ref}": ["delete"],
  "/repos/{owner}/{repo}/rules/branches/{branch}": ["get"],
  "/repos/{owner}/{repo}/branches/{branch}/protection": ["get"],
  "/repos/{owner}/{repo}/compare/{basehead}": ["get"],
  "/app-manifests/{code}/conversions": ["post"]
} as $keep
| .paths as $all
| def op($p; $m):
    ($all[$p][$m] // error("\($m) \($p) is not in the description"))
    | {operationId, responses: (.responses | map_values(
        if .content["application/json"] then {content: {"application/json": .content["application/json"]}} else {} end))};
  [$keep | to_entries[] | .key as $p
   | {key: $p, value: ([.value[] | {key: ., value: op($p; .)}] | from_entries | strip)}] as $paths
# One path a line, so that a refresh shows in a diff which operation moved.
| "{\"openapi\":\(.openapi | tojson),\"info\":\(.info | {title, version} | tojson),\"paths\":{\n"
  + ($paths | map("\(.key | tojson):\(.value | tojson)") | join(",\n"))
  + "\n}}"
' "$src" > rest-openapi.json
