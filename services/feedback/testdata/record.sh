# Sourced by the scripted agents. Each run appends to $RECORD_DIR/runs
#   start <pr> <instance> <id> <unix-ns>   when it begins,
#   end   <pr> <instance> <id> <unix-ns>   when it ends or gets SIGTERM
#                                         (a run SIGKILLed before its trap
#                                         ran has none),
#   overlap <pr> <other-id> <id> <unix-ns> if a process of another agent
#                                         for the same PR is alive,
# and saves what it was given: the prompt from stdin and from
# $PRLOOP_PROMPT_FILE, its environment and its working directory. A run's id
# is its start time and pid: each agent runs in a PID namespace of its own,
# where pids repeat from one run to the next.

run_id="$(date +%s%N).$$"

record_start() {
	key=$(printf '%s' "${PRLOOP_PR:-pr}" | tr -c 'A-Za-z0-9' '_')
	active="$RECORD_DIR/active-$key"
	# Every process of a run holds the PR's lock (fd 9 is inherited), and
	# the kernel frees it when the last of them dies, however it dies: a
	# lock still held means another agent for the PR is alive.
	exec 9>>"$RECORD_DIR/lock-$key"
	if ! flock -n 9; then
		echo "overlap ${PRLOOP_PR:-} $(cat "$active" 2>/dev/null) $run_id $(date +%s%N)" >>"$RECORD_DIR/runs"
	fi
	echo "$run_id" >"$active"
	echo "start ${PRLOOP_PR:-} ${INSTANCE:-none} $run_id $(date +%s%N)" >>"$RECORD_DIR/runs"
	trap 'record_end; exit 143' TERM
	cat >"$RECORD_DIR/stdin.$run_id"
	cp "$PRLOOP_PROMPT_FILE" "$RECORD_DIR/promptfile.$run_id"
	env >"$RECORD_DIR/env.$run_id"
	pwd >"$RECORD_DIR/pwd.$run_id"
}

record_end() {
	if [ "$(cat "$active" 2>/dev/null)" = "$run_id" ]; then
		rm -f "$active"
	fi
	echo "end ${PRLOOP_PR:-} ${INSTANCE:-none} $run_id $(date +%s%N)" >>"$RECORD_DIR/runs"
}

# edit_and_commit changes main.go and commits it as the agent would.
edit_and_commit() {
	printf '// addressed by the agent (%s)\n' "$run_id" >>main.go
	git add main.go
	git -c user.name=agent -c user.email=agent@example.com commit -q -m "Address review comments"
}

# wait_release waits until $RECORD_DIR/release-$INSTANCE exists, at most
# about 20 s: tests hold an instance's agent mid-attempt with it.
wait_release() {
	i=0
	while [ ! -e "$RECORD_DIR/release-${INSTANCE:-none}" ] && [ $i -lt 400 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}
