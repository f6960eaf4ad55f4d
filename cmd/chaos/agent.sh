# The chaos suite's scripted agent. It records in $RECORD_DIR/runs
#   start <pr> <run> <unix-ns>, then end <pr> <run> <unix-ns> if it finished,
#   overlap <pr> <run> <unix-ns> if another agent for the PR was alive,
# holding the PR's lock file on fd 9 for its whole life: the kernel frees it
# when the last process of the run dies, however it dies, so a held lock is
# a live agent. Its output is first a commit marked "partial <run>", which
# only a finished run replaces by "done <run>": a pushed "partial" line is
# output of an interrupted run.
set -eu
run_id="$(date +%s%N).$$"
key=$(printf '%s' "${PRLOOP_PR:-pr}" | tr -c 'A-Za-z0-9' '_')
exec 9>>"$RECORD_DIR/lock-$key"
if ! flock -n 9; then
	echo "overlap ${PRLOOP_PR:-} $run_id $(date +%s%N)" >>"$RECORD_DIR/runs"
fi
echo "start ${PRLOOP_PR:-} $run_id $(date +%s%N)" >>"$RECORD_DIR/runs"
cat >/dev/null
f="${PRLOOP_BRANCH:-chaos}.txt"
echo "partial $run_id" >>"$f"
git add "$f"
git -c user.name=agent -c user.email=agent@example.com commit -q -m "chaos agent: partial $run_id"
# A run takes 1 to 4 s: long enough for the injector to aim at it.
sleep $(( $(od -An -N1 -tu1 /dev/urandom) % 4 + 1 ))
sed -i "s/^partial $run_id\$/done $run_id/" "$f"
git add "$f"
git -c user.name=agent -c user.email=agent@example.com commit -q --amend -m "chaos agent: fix $run_id"
echo "end ${PRLOOP_PR:-} $run_id $(date +%s%N)" >>"$RECORD_DIR/runs"
