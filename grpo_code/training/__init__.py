"""GRPO training on TRL: the trainer subclass (overlapped scoring, timing), prompt
filtering, and the callbacks that write the run directory and show progress.
``grpo_code.train.run_training`` wires them together."""
