# Sourced by the scripted agents. Each run appends to $RECORD_DIR/runs
#   start <pr> <instance> <pid> <unix-ns>   when it begins,
#   end   <pr> <instance> <pid> <unix-ns>   when it ends or gets SIGTERM,
#   overlap <pr> <other-pid> <pid> <unix-ns> if another agent for the same
#                                           PR is still alive when it begins,
# and saves what it was given: the prompt from stdin and from
# $PRLOOP_PROMPT_FILE, its environment and its working directory.

record_start() {
	key=$(printf '%s' "${PRLOOP_PR:-pr}" | tr -c 'A-Za-z0-9' '_')
	active="$RECORD_DIR/active-$key"
	if [ -e "$active" ] && kill -0 "$(cat "$active")" 2>/dev/null; then
		echo "overlap ${PRLOOP_PR:-} $(cat "$active") $$ $(date +%s%N)" >>"$RECORD_DIR/runs"
	fi
	echo $$ >"$active"
	echo "start ${PRLOOP_PR:-} ${INSTANCE:-none} $$ $(date +%s%N)" >>"$RECORD_DIR/runs"
	trap 'record_end; exit 143' TERM
	cat >"$RECORD_DIR/stdin.$$"
	cp "$PRLOOP_PROMPT_FILE" "$RECORD_DIR/promptfile.$$"
	env >"$RECORD_DIR/env.$$"
	pwd >"$RECORD_DIR/pwd.$$"
}

record_end() {
	if [ "$(cat "$active" 2>/dev/null)" = "$$" ]; then
		rm -f "$active"
	fi
	echo "end ${PRLOOP_PR:-} ${INSTANCE:-none} $$ $(date +%s%N)" >>"$RECORD_DIR/runs"
}

# edit_and_commit changes main.go and commits it as the agent would.
edit_and_commit() {
	printf '// addressed by the agent (%s)\n' "$$" >>main.go
	git add main.go
	git -c user.name=agent -c user.email=agent@example.com commit -q -m "Address review comments"
}
