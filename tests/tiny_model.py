"""A tiny chat model, built and taught in seconds on CPU, for fast training tests.

``build_tiny_model(out_dir, tokenizer_dir, tasks)`` makes a 2-layer Llama (hidden 64,
tied embeddings) with the tokenizer and chat template of ``tokenizer_dir`` (SmolLM2's),
then teaches it, with a short seeded supervised loop, to answer each task's prompt,
rendered exactly as ``grpo-code train`` renders it, with one of several replies: the
task's reference solution, a wrong program, a program with a syntax error, and prose
without code. Sampled at temperature 1 it picks among them, so a GRPO group mixes
rewards (1, partial or 0, compile error, no code): the advantage is non-zero and even a
``beta: 0`` update has to change parameters. The model and tokenizer are saved with
``save_pretrained`` so ``model.name=<out_dir>`` loads them like any checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPLIT = "1-4"
"""The demo tasks the model is taught (a ``tasks.train_split`` value)."""
NO_CODE_REPLY = "Sorry, I cannot write that."
TEACH_WEIGHTS = (2, 1, 1, 1)
"""How often each reply is shown: the right one is sampled about 2 times in 5."""


def replies(task: Any) -> list[str]:
    """The replies taught for ``task``: right, wrong (``return 0``: partial credit on some
    tasks), a syntax error, and prose without code."""
    reference = task.reference.rstrip("\n") + "\n"
    header = reference.splitlines()[0]  # "def name(args):"
    wrong = f"{header}\n    return 0\n"
    broken = reference.replace(header, header.rstrip(":"), 1)
    return [f"```python\n{reference}```", f"```python\n{wrong}```", f"```python\n{broken}```", NO_CODE_REPLY]


def build_tiny_model(out_dir: Path, tokenizer_dir: Path, tasks: list[Any], steps: int = 120,
                     lr: float = 1e-2, seed: int = 0, heads: int = 4, hidden: int = 64) -> Path:
    """Build, teach and save the tiny model into ``out_dir``; returns ``out_dir``. With
    ``hidden=128, heads=2`` its attention heads are 64 wide, which the CPU build of vLLM
    computes (16 wide, the default's, it refuses).

    About 4 s of teaching on one core (the loss is near its floor, the entropy of the
    reply mix, after ~100 steps).
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from grpo_code.tasks import render

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=512, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config)

    # One sequence per (task, reply): the prompt as TRL tokenizes it, then the reply and EOS.
    sequences: list[tuple[list[int], int, int]] = []
    for task in tasks:
        messages = render(task, "chat").for_trl()
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                               return_dict=True)["input_ids"]
        for reply, weight in zip(replies(task), TEACH_WEIGHTS, strict=True):
            ids = tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            sequences.append((list(prompt) + ids, len(prompt), weight))
    width = max(len(ids) for ids, _, _ in sequences)
    input_ids = torch.full((len(sequences), width), config.pad_token_id)
    mask = torch.zeros_like(input_ids)
    targets = torch.full_like(input_ids, -100)  # targets[i, t]: the token that follows position t
    weights = torch.zeros(input_ids.shape)
    for row, (ids, prompt_len, weight) in enumerate(sequences):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        mask[row, :len(ids)] = 1
        targets[row, prompt_len - 1:len(ids) - 1] = torch.tensor(ids[prompt_len:])
        weights[row] = weight
    scored = targets != -100
    weights = weights[scored] / weights[scored].sum()

    # Tokens the data never shows get zero (tied) embeddings, so their logits are exactly 0:
    # the softmax over the 49k-token vocabulary is the one over the ~100 tokens in use plus
    # a constant, and teaching trains those rows only (a dense 49k x 64 gradient per step
    # would cost more than the rest of the model).
    used = torch.unique(input_ids)
    local = torch.full((config.vocab_size,), -1)
    local[used] = torch.arange(len(used))
    rows = torch.nn.Parameter(model.model.embed_tokens.weight.detach()[used].clone())
    rest = torch.log(torch.tensor(float(config.vocab_size - len(used))))
    inputs, labels = local[input_ids], local[targets[scored]]
    embedding = model.model.embed_tokens.weight
    body = [p for p in model.parameters() if p is not embedding]
    optimizer = torch.optim.AdamW([rows, *body], lr=lr, weight_decay=0.0)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ops this small lose more to thread hand-offs than they gain
    try:
        for _ in range(steps):
            hidden = model.model(inputs_embeds=rows[inputs], attention_mask=mask).last_hidden_state[scored]
            logits = hidden @ rows.T
            log_z = torch.logaddexp(torch.logsumexp(logits, dim=-1), rest)
            loss = ((log_z - logits.gather(1, labels[:, None]).squeeze(1)) * weights).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        embedding.zero_()
        embedding[used] = rows
    model.eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
