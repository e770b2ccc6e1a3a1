"""Allow ``python -m grpo_code``."""

from grpo_code.cli import main

main()
