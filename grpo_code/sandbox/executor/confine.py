"""What keeps a test's process to itself: prctl, the seccomp filter, the OOM killer's order.

Every test process (a Python program's, and a JavaScript or C++ one's before it ``exec``-s
its runtime) is confined by :func:`confine` (the filter is built once, in the parent, by
:func:`prepare_seccomp`) and made the OOM killer's first choice by :func:`first_to_go`;
the harness's own processes use :func:`prctl` to make themselves non-dumpable. Standard
library only.
"""

from __future__ import annotations

import os

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4

_LIBC_PRCTL: list = []


def prctl(option: int, value: int) -> bool:
    """prctl(2) through ctypes (loaded once, in the parent, so children pay nothing)."""
    try:
        if not _LIBC_PRCTL:
            import ctypes

            _LIBC_PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        return _LIBC_PRCTL[0](option, value, 0, 0, 0) == 0
    except Exception:
        return False


# --------------------------------------------------------------------------- seccomp

# Syscalls that act on another process or on scheduling, per architecture, and the rule
# that keeps each to the caller. Same-uid processes may call them on each other even when
# the target is non-dumpable: a program could lower the zygote's or the judge's limits
# (prlimit), or starve them (SCHED_IDLE, nice 19, idle I/O priority), and so change other
# tests' verdicts. "pid": the pid (argument 0) must be 0, the caller. "ioprio"
# (ioprio_set) takes a (which, who) pair, where who 0 with IOPRIO_WHO_USER means every
# process of the uid and with IOPRIO_WHO_PGRP a process group the caller may have joined:
# which must be the single process (IOPRIO_WHO_PROCESS 1) and who 0. "deny": refused
# whatever the arguments. setpriority has the same (which, who) shape, and on itself a
# test has no use for it, nor for a scheduling policy: a program that makes itself nice
# 19 or SCHED_IDLE on a loaded machine would wait for a CPU (time that is not counted)
# until the wall-clock backstop, past the host's deadline for the job, an infra_error.
# Reviewed and left alone: the rest act on the caller or its children only (setrlimit,
# setpgid, waitid, sched_setaffinity and sched_setparam on pid 0), need ptrace access,
# which the harness's non-dumpable processes refuse (process_vm_writev, pidfd_getfd,
# migrate_pages, move_pages, perf_event_open, kcmp), or send signals (docs/sandbox.md).
# Foreign-architecture syscalls (i386 int 0x80, x32) are refused.
# Memory a test could leave behind where killing its processes does not free it, or outside
# the container's charge, is refused too: memfd_create (memory files passed over a unix
# socket and left in flight outlive their maker until the kernel's unix GC runs, ~1 GiB of
# them filled the next job's container), IPv4/IPv6 sockets ("socket": the container has
# only loopback, whose TCP buffers a cgroup v1 host does not charge to the container: one
# test could hold gigabytes of the machine's memory), and io_uring (which opens sockets
# and files without the syscalls this filter sees).
_PID_SYSCALLS = {
    # setpriority, sched_setparam, sched_setscheduler, sched_setaffinity, ioprio_set, prlimit64, sched_setattr;
    # memfd_create, io_uring_setup/enter/register, socket
    "x86_64": (0xC000003E, {141: "deny", 142: "pid", 144: "deny", 203: "pid", 251: "ioprio", 302: "pid",
                            314: "deny", 319: "deny", 425: "deny", 426: "deny", 427: "deny", 41: "socket"}),
    "aarch64": (0xC00000B7, {140: "deny", 118: "pid", 119: "deny", 122: "pid", 30: "ioprio", 261: "pid",
                             274: "deny", 279: "deny", 425: "deny", 426: "deny", 427: "deny", 198: "socket"}),
}
_AF_INET, _AF_INET6 = 2, 10
_SELF_WHICH = {"ioprio": 1}  # IOPRIO_WHO_PROCESS
# clone with CLONE_PARENT makes the new process a sibling of the caller: a child of the
# zygote, outside the test's process tree, where the test's cleanup would not find it.
# clone3 passes its flags in memory the filter cannot read: it answers ENOSYS, and the C
# library falls back to clone.
_CLONE = {"x86_64": (56, 435), "aarch64": (220, 435)}
CLONE_PARENT = 0x8000
_SECCOMP: list = []
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22


def _seccomp_program():
    """The BPF filter (a ctypes sock_fprog) for this machine's architecture, or None."""
    import ctypes

    spec = _PID_SYSCALLS.get(os.uname().machine)
    if spec is None:
        return None
    arch, calls = spec
    clone, clone3 = _CLONE[os.uname().machine]
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    enosys = 0x00050000 | 38  # SECCOMP_RET_ERRNO | ENOSYS
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    code: list = [("i", ld, 0, 0, 4), ("j", jeq, 1, 0, arch), ("i", ret, 0, 0, deny), ("i", ld, 0, 0, 0)]
    if arch == 0xC000003E:
        code.append(("j", jge, "deny", 0, 0x40000000))  # the x32 ABI
    for nr, rule in calls.items():
        code.append(("j", jeq, rule, 0, nr))
    code += [("j", jeq, "clone", 0, clone), ("j", jeq, "enosys", 0, clone3)]
    code.append(("i", ret, 0, 0, allow))
    labels = {}
    for rule, which in _SELF_WHICH.items():  # argument 0 the single process, argument 1 zero
        labels[rule] = len(code)
        code += [("i", ld, 0, 0, 16), ("j", jeq, 0, "deny", which), ("i", ld, 0, 0, 24),
                 ("j", jeq, "allow", "deny", 0)]
    labels["pid"] = len(code)
    code += [("i", ld, 0, 0, 16), ("j", jeq, "allow", "deny", 0)]
    labels["socket"] = len(code)  # the domain is socket's first argument
    code += [("i", ld, 0, 0, 16), ("j", jeq, "deny", 0, _AF_INET), ("j", jeq, "deny", "allow", _AF_INET6)]
    labels["clone"] = len(code)  # the flags are clone's first argument (its low 32 bits)
    code += [("i", ld, 0, 0, 16), ("j", jset, "deny", "allow", CLONE_PARENT)]
    labels["enosys"] = len(code)
    code.append(("i", ret, 0, 0, enosys))
    labels["allow"] = len(code)
    code.append(("i", ret, 0, 0, allow))
    labels["deny"] = len(code)
    code.append(("i", ret, 0, 0, deny))

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    def target(at: int, jump) -> int:
        return labels[jump] - at - 1 if isinstance(jump, str) else jump

    items = (Filter * len(code))(*[Filter(op, target(i, jt), target(i, jf), k)
                                   for i, (_, op, jt, jf, k) in enumerate(code)])
    program = Program(len(code), items)
    return program, items  # keep the array alive with the program


def prepare_seccomp() -> bool:
    """Build the filter in this (parent) process and check in a forked child that the
    kernel takes it; forked children then call :func:`confine`."""
    if _SECCOMP:
        return _SECCOMP[0] is not None
    try:
        built = _seccomp_program()
    except Exception:
        built = None
    _SECCOMP.append(built)
    if built is None:
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(0 if confine() else 1)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        _SECCOMP[0] = None
    return _SECCOMP[0] is not None


def confine() -> bool:
    """Install the filter in this process (inherited by its children); True when it is in."""
    if not _SECCOMP or _SECCOMP[0] is None:
        return False
    import ctypes

    prctl(PR_SET_NO_NEW_PRIVS, 1)
    program = _SECCOMP[0][0]
    call = _LIBC_PRCTL[0]
    return call(PR_SET_SECCOMP, ctypes.c_ulong(2), ctypes.c_void_p(ctypes.addressof(program)),
                ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0


def first_to_go() -> None:
    """Make this process (and what it forks) the first the kernel's OOM killer picks
    (``oom_score_adj`` 1000; raising it needs no privilege). A test can fill its
    container's memory where ``RLIMIT_AS`` does not look (memory files written, not
    mapped, System V semaphores, xattrs, pipe buffers): the cgroup's OOM killer then ends
    the test's processes, its ``memory`` verdict, never the executor or the judge.

    A non-dumpable process's ``/proc/self`` files belong to root, so the write would be
    refused: the process is made dumpable for the write and put back as it was (a forked
    child of the non-dumpable executor still holds a copy of its memory until it execs;
    no untrusted process is alive between two tests to ptrace it in that moment). Raises
    ``OSError`` when the value cannot be set: a test process the OOM killer would spare
    is the harness's failure, never a silent one."""
    dumpable = _prctl_get(PR_GET_DUMPABLE)
    if dumpable == 0:
        prctl(PR_SET_DUMPABLE, 1)
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, b"1000")
        finally:
            os.close(fd)
    finally:
        if dumpable == 0:
            prctl(PR_SET_DUMPABLE, 0)


def _prctl_get(option: int) -> int:
    """A prctl(2) that returns a value (``PR_GET_*``); -1 when it fails."""
    try:
        if not _LIBC_PRCTL:
            import ctypes

            _LIBC_PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        return int(_LIBC_PRCTL[0](option, 0, 0, 0, 0))
    except Exception:
        return -1


# --------------------------------------------------------------------------- Landlock

_LANDLOCK_SYSCALLS = (444, 445, 446)  # create_ruleset, add_rule, restrict_self (x86_64 and aarch64 alike)
_LANDLOCK_WRITE_FILE = 1 << 1
_LANDLOCK_TRUNCATE = 1 << 14  # ABI 3
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_VERSION = 1  # create_ruleset flag: ask for the ABI version
_LANDLOCK_ABI: list[int] = []


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (kernel, LSM list or the
    container's seccomp profile). Asked once, in the parent."""
    if not _LANDLOCK_ABI:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _LANDLOCK_ABI.append(max(0, int(libc.syscall(_LANDLOCK_SYSCALLS[0], None, 0, _LANDLOCK_VERSION))))
        except Exception:
            _LANDLOCK_ABI.append(0)
    return _LANDLOCK_ABI[0]


def writable_paths(cwd: str) -> list[str]:
    """Where a test may open files for writing: its work directory, ``/dev`` (``/dev/null``,
    ``/dev/shm``, ``/dev/mqueue``) and ``$TMPDIR`` (the work directory in a container)."""
    paths = [cwd, "/dev"]
    tmp = os.environ.get("TMPDIR")
    if tmp and os.path.isdir(tmp) and tmp not in paths:
        paths.append(tmp)
    return paths


_PREPARED: dict[tuple[str, ...], int] = {}
_RESTRICT: list = []


def prepare_writable(paths: list[str]) -> None:
    """Build the Landlock ruleset of :func:`writable_only` for ``paths`` once, in a parent
    (the zygote, the executor): a child then restricts itself with one syscall instead of
    building it (a third of a millisecond a test, most of it ctypes). The ruleset's fd is
    closed in the child with every other fd it does not need."""
    key = tuple(paths)
    if key in _PREPARED or landlock_abi() <= 0:
        return
    import ctypes

    _PREPARED[key] = _ruleset(paths)
    _RESTRICT.append(ctypes.CDLL(None, use_errno=True).syscall)


def writable_only(paths: list[str]) -> None:
    """Let this process (and what it forks and execs) open files for writing only beneath
    ``paths`` (Landlock; reading is untouched). What this keeps a test from: writing its own
    ``/proc/self/oom_score_adj`` back down (an unprivileged process may lower it to the
    floor it started with, 0), after which memory it holds outside its address space
    (socket buffers, pipes) makes the OOM killer take the executor instead: an
    ``infra_error`` the program caused. Pipes and sockets reached through ``/proc/self/fd``
    or ``/dev/stdout`` stay writable (Landlock leaves pseudo file systems alone).

    Needs no_new_privs (set here, as :func:`confine` does; the container's
    ``no-new-privileges`` sets it too). A kernel without Landlock leaves it out (the
    executor's ready line says which); any other failure raises ``OSError``."""
    if landlock_abi() <= 0:
        return
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prepared = _PREPARED.get(tuple(paths))
    if prepared is not None:
        _restrict(prepared, _RESTRICT[0])
        return
    import ctypes

    ruleset = _ruleset(paths)
    try:
        _restrict(ruleset, ctypes.CDLL(None, use_errno=True).syscall)
    finally:
        os.close(ruleset)


def _restrict(ruleset: int, syscall) -> None:
    import ctypes

    if syscall(_LANDLOCK_SYSCALLS[2], ruleset, 0):
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")


def _ruleset(paths: list[str]) -> int:
    """A Landlock ruleset (its fd, close-on-exec) that handles writing files and allows it
    beneath ``paths``."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    abi = landlock_abi()
    handled = _LANDLOCK_WRITE_FILE | (_LANDLOCK_TRUNCATE if abi >= 3 else 0)

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(handled)
    ruleset = libc.syscall(_LANDLOCK_SYSCALLS[0], ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        os.set_inheritable(ruleset, False)
        for path in paths:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
            try:
                rule = PathBeneath(handled, fd)
                if libc.syscall(_LANDLOCK_SYSCALLS[1], ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset
