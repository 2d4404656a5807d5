"""``rollout.enable_thinking`` reaches every chat-template call, tested with a Qwen3-style template
(``tests/helpers/qwen3_chat.py``): Qwen3 opens a thinking block unless the template gets
``enable_thinking=False``, and the paper turns thinking off. The paths: a run's warm start,
rollouts and evaluations; mas-eval of a run folder (as trained), of a model folder, and of a
served model in token mode (local template) and chat mode (the server's, by
``chat_template_kwargs``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from qwen3_chat import THINKING_OFF_SUFFIX, qwen3_style_tokenizer, save_qwen3_style_model  # noqa: E402

from mas_trainer.rollout import encode_prompt  # noqa: E402

OBS = {"system": "You plan paths.", "prompt": "Go from S to G."}


def _ends_thinking_off(tok, ids) -> bool:
    suffix = tok.encode(THINKING_OFF_SUFFIX, add_special_tokens=False)
    return list(ids[-len(suffix) :]) == suffix


def test_the_template_honours_enable_thinking_as_qwen3s_does():
    tok = qwen3_style_tokenizer()
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    off = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False,
                                  enable_thinking=False)  # fmt: skip
    on = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert off == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n" + (
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert on.endswith("<|im_start|>assistant\n") and "<think>" not in on
    assert tok.convert_tokens_to_ids("<think>") != tok.unk_token_id  # one token, as in Qwen3


def test_encode_prompt_turns_thinking_off_unless_asked():
    tok = qwen3_style_tokenizer()
    assert _ends_thinking_off(tok, encode_prompt(tok, OBS))  # the default: the paper's setting
    assert not _ends_thinking_off(tok, encode_prompt(tok, OBS, enable_thinking=True))
    from mas_trainer.config import PRESETS

    paper = [c for n, c in PRESETS.items() if "-qwen3-" in n]
    assert paper and all(not c.rollout.enable_thinking for c in paper)


@pytest.mark.parametrize("thinking", [False, True])
def test_every_phase_of_a_run_sends_the_configured_prompts(tmp_path, monkeypatch, thinking):
    # A run on a Qwen3-style model folder: every prompt the engine samples (warm-start
    # evaluation, RL rollouts, evaluations) and every warm-start target's prompt.
    from test_train import FAST

    from mas_trainer.config import build_config
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.learner import Learner
    from mas_trainer.train import train

    folder = save_qwen3_style_model(tmp_path / "qwen3-style")
    tok = qwen3_style_tokenizer()
    prompts, sft_prompts = [], []
    generate, sft = TransformersEngine.generate, Learner.sft_update

    def spy_generate(self, batch, params, seed=None):
        prompts.extend(batch)
        return generate(self, batch, params, seed=seed)

    def spy_sft(self, samples, lr=None):
        sft_prompts.extend(s.prompt_ids for s in samples)
        return sft(self, samples, lr=lr)

    monkeypatch.setattr(TransformersEngine, "generate", spy_generate)
    monkeypatch.setattr(Learner, "sft_update", spy_sft)
    cfg = build_config(
        "plan-path-tiny",
        overrides=[*FAST, "--run.out_dir", str(tmp_path), "--model.name", str(folder),
                   "--rollout.enable_thinking", str(thinking).lower()],
    )  # fmt: skip
    train(cfg)
    assert len(prompts) > 20 and sft_prompts
    assert {_ends_thinking_off(tok, p) for p in prompts + sft_prompts} == {not thinking}
    # mas-eval on the run folder evaluates as the run was trained: its switch, unless told.
    from mas_trainer.eval.cli import main as eval_main

    run = next(tmp_path.glob("*/metrics.jsonl")).parent
    same = ("--enable-thinking", str(thinking).lower())
    for flag, off in (
        ((), not thinking),
        (same, not thinking),
        (("--enable-thinking", "false"), True),
    ):
        prompts.clear()
        argv = ["--env", "digit_env:DigitEnv", "--policy", str(run), "--episodes", "1", *flag]
        assert eval_main(argv) == 0
        assert prompts and {_ends_thinking_off(tok, p) for p in prompts} == {off}, flag


def _spy_prompts(monkeypatch) -> list[list[int]]:
    from mas_trainer.engines.transformers import TransformersEngine

    prompts: list[list[int]] = []
    generate = TransformersEngine.generate

    def spy(self, batch, params, seed=None):
        prompts.extend(batch)
        return generate(self, batch, params, seed=seed)

    monkeypatch.setattr(TransformersEngine, "generate", spy)
    return prompts


EVAL = ["--env", "mas/PlanPath-v0", "--episodes", "1", "--max-new-tokens", "2"]


FLAGS = [
    ((), True),
    (("--enable-thinking", "true"), False),
    (("--enable-thinking", "default"), False),
]
"""mas-eval's flags and whether the prompts then end thinking off (the template's default: on)."""


@pytest.mark.parametrize("flag, off", FLAGS)
def test_mas_eval_of_a_model_folder_passes_the_switch(tmp_path, monkeypatch, flag, off):
    from mas_trainer.eval.cli import main

    folder = save_qwen3_style_model(tmp_path / "qwen3-style")
    prompts = _spy_prompts(monkeypatch)
    assert main([*EVAL, "--policy", str(folder), *flag]) == 0
    assert prompts and {_ends_thinking_off(qwen3_style_tokenizer(), p) for p in prompts} == {off}


def test_mas_eval_openai_token_and_chat_modes_pass_the_switch(tmp_path):
    """Token mode applies the local template with the switch; chat mode sends it to the server
    (``chat_template_kwargs``), and ``default`` sends none."""
    from test_openai_engine import FakeServer, completion_reply

    from mas_trainer.eval.cli import main

    folder = save_qwen3_style_model(tmp_path / "qwen3-style")
    tok = qwen3_style_tokenizer()
    server = FakeServer()

    def reply(body):
        if body is None:  # GET /models
            return 200, {"data": [{"id": "tiny", "root": str(folder)}]}, 0.0
        if "messages" in body:
            return 200, {"choices": [{"message": {"content": "#### U"}}]}, 0.0
        return 200, completion_reply(tok.encode("#### U", add_special_tokens=False)), 0.0

    server.default = reply
    served = [*EVAL, "--policy", "openai:tiny", "--base-url", server.url]
    tokens = [*served, "--openai-mode", "tokens", "--tokenizer", str(folder)]
    try:
        for flag, off in (((), True), (("--enable-thinking", "true"), False)):
            server.requests.clear()
            assert main([*tokens, *flag]) == 0
            sent = [r["body"]["prompt"] for r in server.requests if r["path"] == "/v1/completions"]
            assert sent and {_ends_thinking_off(tok, p) for p in sent} == {off}, flag
        sends = (((), {"enable_thinking": False}), (("--enable-thinking", "default"), None))
        for flag, kwargs in sends:
            server.requests.clear()
            assert main([*served, *flag]) == 0
            chats = [r["body"] for r in server.requests if r["path"] == "/v1/chat/completions"]
            assert chats and all(b.get("chat_template_kwargs") == kwargs for b in chats), flag
    finally:
        server.close()
