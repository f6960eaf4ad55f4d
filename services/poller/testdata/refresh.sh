#!/usr/bin/env bash
# refresh.sh rebuilds webhooks-openapi.json from GitHub's dereferenced
# webhooks description (npm package @octokit/openapi-webhooks,
# generated/api.github.com.deref.json):
#
#   npm pack @octokit/openapi-webhooks@12.1.0 && tar xzf octokit-openapi-webhooks-12.1.0.tgz
#   ./refresh.sh package/generated/api.github.com.deref.json
#
# It keeps the webhooks whose fields webhook_test.go checks (the list
# below), and of each only its payload schema, without prose and examples,
# which no test reads. Tests never run this script; they read its
# committed output.
set -euo pipefail
src=${1:?usage: refresh.sh path/to/api.github.com.deref.json}
src=$(realpath "$src")
cd "$(dirname "$0")"
jq -L ../../../pkg/ghsim/testdata -r '
# strip is shared with the OpenAPI cut of pkg/ghsim.
include "strip";
[
  "pull-request-opened", "pull-request-synchronize", "pull-request-closed", "pull-request-reopened",
  "pull-request-review-submitted", "pull-request-review-comment-created",
  "issue-comment-created", "check-suite-completed", "status"
] as $keep
| .webhooks as $all
| [$keep[] | . as $w
   | ($all[$w].post.requestBody.content["application/json"].schema // error("webhook \($w) is not in the description"))
   | {key: $w, value: {post: {requestBody: {content: {"application/json": {schema: strip}}}}}}] as $hooks
# One webhook a line, so that a refresh shows in a diff which one moved.
| "{\"info\":\(.info | {title, version} | tojson),\"webhooks\":{\n"
  + ($hooks | map("\(.key | tojson):\(.value | tojson)") | join(",\n"))
  + "\n}}"
' "$src" > webhooks-openapi.json
