"""Judging answers: one :class:`~grpo_code.verify.verifier.Verifier` for training rewards,
eval, multi-turn turns, ``tasks check`` and the reference oracle (:mod:`.verifier`); the
content-addressed verdict store (:mod:`.store`); the failure text (:mod:`.failure`); the
trainer's seam for early scoring (:mod:`.early`); the multi-turn loop (:mod:`.turns`)."""
