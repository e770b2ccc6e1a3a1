"""GRPO training on TRL: the trainer (overlapped scoring, timing, several processes), the
one module that touches TRL's internals (:mod:`.trl_seam`), prompt filtering, the
length-grouped forward pass (:mod:`.packing`), and the callbacks that write the run
directory and show progress. ``grpo_code.train.run_training`` wires them together."""
