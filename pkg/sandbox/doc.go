// Package sandbox runs the coding agent where it cannot reach prloop's
// secrets: not its environment, not its files, not its processes.
// PRLOOP_AGENT_SANDBOX picks the backend (ParseMode); New resolves Auto by
// probing, and Init must run first in main (and in TestMain) so the
// Namespaces backend can re-execute the binary as the sandbox's init.
//
// # What Bwrap and Namespaces guarantee
//
// Both real backends give the command the same world:
//
//   - Its own PID namespace: /proc is a fresh proc showing only the
//     sandbox's processes, so /proc/<prloop pid>/environ and cmdline are
//     unreachable and prloop's processes cannot be signalled. Also its own
//     mount, IPC and UTS namespaces, and a user namespace when prloop is not
//     root (bwrap: --unshare-user-try). The network is shared: the agent
//     must reach its model API.
//   - A filesystem built from nothing: /usr /bin /sbin /lib /lib32 /lib64
//     /etc /opt read-only where they exist (merged-/usr symlinks stay
//     symlinks); a minimal /dev (null, zero, full, random, urandom, tty); a
//     tmpfs /tmp; a private empty HOME (/home/agent, tmpfs); Cmd.Dir and the
//     Writable paths read-write; the ReadOnly paths read-only; the root
//     itself read-only. Nothing else of the host: /root, /home, /run,
//     /var/lib, the data directory and other workspaces do not exist inside,
//     and /home holds only the private HOME.
//   - The environment is exactly Cmd.Env with HOME=/home/agent, TMPDIR=/tmp
//     and PWD=Cmd.Dir; no value travels on a command line.
//   - No open descriptor but stdin, stdout and stderr: Run marks every
//     other descriptor of prloop close-on-exec first, so one prloop
//     inherited from whatever started it (a host directory, a socket) does
//     not reach the command.
//   - No capabilities and no_new_privs: even when prloop runs as root, the
//     command cannot remount, mount or regain privileges.
//   - Lifetime: when Run returns, by any path, no process started in the
//     sandbox is alive, setsid and double-forked children included, because
//     the sandbox's init is pid 1 of its PID namespace and the kernel kills
//     the namespace when it dies. A SIGKILL of prloop kills it too
//     (parent-death signal on the init and on bwrap, --die-with-parent).
//     When ctx ends the command gets SIGTERM, and everything SIGKILL after
//     Cmd.KillGrace.
//
// Files the command writes in Dir belong to prloop's user on the host. With
// a user namespace the command sees itself as root (uid 0 inside, bwrap:
// prloop's uid) but holds no capability over anything outside.
//
// # What None gives up
//
// None runs the command as prloop's user in a new process group, as prloop
// did before the sandbox: the agent sees prloop's files, HOME
// (~/.git-credentials, gh's token, SSH_AUTH_SOCK if in Env), /proc and so
// every process's environment (GITHUB_TOKEN of prloop itself), and can
// signal prloop. The process group is killed on timeout and after exit, but
// a child that calls setsid (Node's detached: true) escapes that kill and
// outlives the run, and a SIGKILL of prloop only reaches the direct child.
// Use None only where the agent is trusted or isolated by other means (its
// own container without the token).
//
// # Memory
//
// Options.MemoryMax is applied with a cgroup v2 child of prloop's own
// cgroup per run (memory.max, started in it with CLONE_INTO_CGROUP) when
// that cgroup is writable and delegates the memory controller; otherwise it
// is logged once and ignored.
package sandbox
