"""Entry point: ``python3 -I /opt/grpo-code/executor [--zygote | --workdir DIR ...]``.

Loads this directory as the package ``grpo_executor`` (without putting it on sys.path,
where its module names could shadow others) and runs the executor or the zygote.
"""

import importlib.util
import os
import sys


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "grpo_executor", os.path.join(here, "__init__.py"), submodule_search_locations=[here]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["grpo_executor"] = package
    spec.loader.exec_module(package)
    return here


if __name__ == "__main__":
    HERE = os.path.join(_load(), "__main__.py")
    # Light modules programs commonly import, loaded once so forked children get them free.
    for name in ("bisect", "collections", "functools", "heapq", "itertools", "math", "re", "string", "typing"):
        importlib.import_module(name)

    if sys.argv[1:] == ["--check"]:  # the image build's self-test
        from grpo_executor import judge, main, native, pyjob, zygote  # noqa: F401

        sys.exit(0)
    if sys.argv[1:2] == ["--warm"]:  # the image build fills the language's caches (Runner.warm)
        from grpo_executor.runners import RUNNERS

        RUNNERS[sys.argv[2]].warm()
        sys.exit(0)
    if sys.argv[1:2] == ["--zygote"]:
        from grpo_executor import zygote  # and nothing else of the executor's: a small process to fork

        sys.exit(zygote.zygote_main(sys.argv[2:]))
    from grpo_executor import main as executor_main

    sys.exit(executor_main.main(sys.argv[1:], HERE))
