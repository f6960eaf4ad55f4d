#!/bin/sh
# Scripted agent: resolves the merge prloop started by taking both sides'
# main.go, and commits the merge. EXTRA=unrelated also changes a file
# neither side changed; EXTRA=commit adds a second commit after the merge.
set -eu
. "$(dirname "$0")/record.sh"
record_start
git rev-parse -q --verify MERGE_HEAD >/dev/null
printf 'package main\n\nfunc main() { println(1) }\n\nfunc helper() {}\n' >main.go
if [ "${EXTRA:-}" = unrelated ]; then echo "# touched" >>README.md; fi
git add -A
git -c user.name=agent -c user.email=agent@example.com commit -q --no-edit
if [ "${EXTRA:-}" = commit ]; then
	echo "// more" >>main.go
	git -c user.name=agent -c user.email=agent@example.com commit -qam "More"
fi
record_end
