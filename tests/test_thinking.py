"""``rollout.enable_thinking`` reaches every chat-template call, tested with a Qwen3-style template
(``tests/qwen3_chat.py``): Qwen3 opens a thinking block unless the template gets
``enable_thinking=False``, and the paper turns thinking off."""

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
