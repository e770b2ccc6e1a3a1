"""The in-sandbox executor: a package copied into every sandbox image (``/opt/grpo-code/executor``)
and started as a plain host subprocess by the local backend. Standard library only; runs
on Python >= 3.10.

Modules, in the order a job meets them:

* ``main``: the host's channel and the job loop (the harness process, non-dumpable).
* ``zygote``: a clean interpreter that forks the program's processes (Python).
* ``pychild``: the program's process for a Python test (the only place its code runs).
* ``judge``: trusted test code of a Python script test, in its own process, calling the
  program through ``codec`` values.
* ``native`` and ``runners``: other languages (build once, exec per test) and ``harness/``.
* ``spawn``: watching processes, deadlines from CPU time, cleanup.
* ``verdict``: the decision, a pure function of what was observed.
* ``codec`` and ``protocol``: values and framing on every channel.

Start it with ``python3 -I <this directory>`` (``__main__.py``).
"""
