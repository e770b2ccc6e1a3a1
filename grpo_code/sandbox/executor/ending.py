"""How a Python ``io`` program ends: as ``python3`` ends it at exit (``Py_FinalizeEx``).

The program's process (``pychild.py``) calls :func:`exit_as_python_does` after the module
body, or after ``sys.exit(0)``, and only then reports the test complete, so what a program
writes on the way out (an ``atexit`` callback, a ``__del__``, a buffered file never
flushed, a thread never joined) is part of its output, as it is under ``python3``.
Standard library only.
"""

from __future__ import annotations

import sys


def exit_as_python_does(namespace: dict, flush) -> None:
    """What ``python3`` does when an ``io`` program ends (``Py_FinalizeEx``), before the
    test is reported complete, so output written on the way out counts: wait for the
    threads, run the ``atexit`` callbacks (a fast-output template that writes its buffer
    there), flush the standard streams (also ``sys.__stdout__``, where such a callback may
    write), then drop the program's globals (a ``__del__`` that prints, a buffered file on
    fd 1 that was never flushed), collect what is left and flush the files still open. All of it is the program's
    code, within the test's limits; an exception in it is shown, as Python shows one.
    ``flush`` flushes the standard streams."""
    wait_for_threads()
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    flush()
    try:
        namespace.clear()
        import gc
        import io

        gc.collect()
        # What is still open (a buffered file on fd 1 the program keeps elsewhere, in `sys`
        # say) is flushed, as the interpreter's teardown would flush it.
        for obj in gc.get_objects():
            try:
                if isinstance(obj, io.IOBase) and not obj.closed:
                    obj.flush()
            except BaseException:
                pass
    except BaseException:
        pass
    flush()


def wait_for_threads() -> None:
    """What the interpreter does at exit before a program's process ends: run the
    ``threading`` exit hooks (a ``ThreadPoolExecutor`` left open lets its workers go) and
    wait for every non-daemon thread. ``threading.Thread(target=main).start()`` with no
    ``join()`` (a common idiom for a deeper stack) runs its ``main`` to the end under
    ``python3``, and so here; the test's limits still bound it."""
    threading = sys.modules.get("threading")
    if threading is None:
        return  # the program started no thread through it
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
        return
    me = threading.current_thread()
    while True:
        waiting = [t for t in threading.enumerate() if t is not me and not t.daemon]
        if not waiting:
            return
        for thread in waiting:
            thread.join()
