"""What every language runner is made of: :class:`Runner` (the interface the executor
calls), :class:`Launch` (one test's process) and the helpers the runners share. Standard
library only, in every sandbox image (docs/languages.md)."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Callable
from typing import Any

HARNESS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness")

# compile(argv, output, memory_mb=None) -> the file ``output`` as a sealed, read-only fd
# (an executable the executor can exec) or the compiler's message when the build failed.
CompileFn = Callable[..., "int | str"]


class Launch:
    """One test's process: ``argv`` run from ``executable`` (a path, or a sealed fd).

    ``payload`` is read by the process's harness on fd 4 (empty: fd 4 is not opened);
    ``memory_mb`` is its RLIMIT_AS; ``aux_fd`` is a sealed read-only file it reads as
    /proc/self/fd/6 (a runtime snapshot). ``judge``: a judged script test's trusted
    process (another Launch, its executable one the sandbox's user cannot read), which
    runs the test and calls this one's functions over a socket (native.run_judged_test)."""

    __slots__ = ("argv", "executable", "payload", "memory_mb", "aux_fd", "judge")

    def __init__(
        self, argv: list[str], executable: str | int, payload: bytes, memory_mb: int, aux_fd: int | None = None,
        judge: Launch | None = None,
    ):
        self.argv = argv
        self.executable = executable
        self.payload = payload
        self.memory_mb = memory_mb
        self.aux_fd = aux_fd
        self.judge = judge

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Launch) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


class Runner:
    """Base of the language runners; the methods below are the whole interface."""

    language = ""
    tools: tuple[str, ...] = ()
    """Executables the runner needs on PATH (checked before a job runs)."""
    in_process = False
    judged_scripts = False
    """Its script tests run in a judge of their own (attested), not next to the program."""

    def judges(self, helpers: str | None, codes: list[str]) -> bool:
        """Whether script tests ``codes`` of a job with these ``helpers`` get a judge."""
        return self.judged_scripts

    def missing_tools(self) -> list[str]:
        return [tool for tool in self.tools if shutil.which(tool) is None]

    def prepare(self, job: dict, workdir: str, compile: CompileFn) -> Any:
        """Write files and build once for the whole job; returns the runner's state."""
        return None

    def launch(self, job: dict, state: Any, index: int, nonce: str) -> Launch | str:
        """The process of test ``index``, or the compiler's message if its build failed."""
        raise NotImplementedError

    def classify(self, signum: int | None, code: int | None, stderr: bytes) -> tuple[str, str] | None:
        """A verdict for a process that ended without a report, or None for the default."""
        return None

    def release(self, state: Any) -> None:
        """Free what ``prepare`` made (sealed executables)."""

    def warm(self) -> None:
        """Fill the image's read-only caches at image build (``executor --warm LANG``)."""



def write(workdir: str, name: str, text: str) -> None:
    # surrogatepass: a lone surrogate in a program (JSON can carry one) is written as the
    # bytes it stands for, for the compiler to judge, not an error of the executor's.
    path = os.path.join(workdir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)




FULL = (errno.ENOSPC, errno.EDQUOT)
"""What writing a build's files meets when the program's own size fills the work directory."""


def write_alone(workdir: str, files: dict[str, str]) -> None:
    """Write one build's sources into an emptied work directory: no build of a job sees
    another's sources (a test's asserts, ``.incbin`` or not) or what it left (inodes)."""
    wipe(workdir)
    for name, text in files.items():
        write(workdir, name, text)


def seal(data: bytes, name: str) -> int:
    """``data`` as a memory file no one can change (write seals): what a test runs or reads
    from it cannot be rewritten by an earlier test of the job."""
    sealed = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(sealed, view):]
    fcntl.fcntl(sealed, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    os.lseek(sealed, 0, os.SEEK_SET)  # a reader of the inherited descriptor starts at the top
    return sealed


def wipe(path: str) -> bool:
    """Empty a directory, including entries a test made unreadable (chmod 000), without
    following symlinks, without recursion and through directory descriptors only: a test
    may nest directories deeper than any path can name (PATH_MAX), and one descriptor is
    open at a time. Each directory is listed once (the names left to do at each level are
    kept, not listed again on the way back up), so the work is linear in what the test
    made: thousands of directories cost the same per entry as one. Returns whether the
    directory is empty afterwards."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        cur = os.open(path, flags)
    except OSError:
        return not os.path.lexists(path)
    pending: list[tuple[list[str], str]] = []  # per level above: names left there, the one entered

    def listing(fd: int) -> list[str]:
        try:
            return os.listdir(fd)
        except OSError:
            return []

    names = listing(cur)
    try:
        while True:
            while names:
                name = names.pop()
                try:
                    st = os.stat(name, dir_fd=cur, follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    try:
                        os.unlink(name, dir_fd=cur)
                    except OSError:
                        pass
                    continue
                try:
                    os.rmdir(name, dir_fd=cur)
                    continue
                except OSError:
                    pass
                try:
                    os.chmod(name, stat.S_IRWXU, dir_fd=cur)  # a directory, not a link (stat above)
                    sub = os.open(name, flags, dir_fd=cur)
                except OSError:
                    continue  # it stays: the directory is reported not empty
                pending.append((names, name))
                os.close(cur)
                cur, names = sub, listing(sub)
            if not pending:
                return not listing(cur)
            parent = os.open("..", flags, dir_fd=cur)
            os.close(cur)
            cur = parent
            names, done = pending.pop()
            try:
                os.rmdir(done, dir_fd=cur)
            except OSError:
                pass  # something in it could not go: the directory is reported not empty
    finally:
        os.close(cur)
