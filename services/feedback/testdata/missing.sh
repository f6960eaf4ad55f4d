#!/bin/sh
# Scripted agent: says on stderr where it runs, then fails as a shell does
# when the agent's program is not found (exit 127, MISSING=127) or is not
# executable (exit 126, MISSING=126).
. "$(dirname "$0")/record.sh"
record_start
record_end
echo "working in $PWD with the prompt in $PRLOOP_PROMPT_FILE" >&2
case "${MISSING:-127}" in
126)
	printf '#!/bin/sh\n' >"$TMPDIR/agent"
	"$TMPDIR/agent" -p
	;;
*) no-such-agent-xyz -p ;;
esac
