"""A team of different base models (``model.role_models``): each policy samples, trains, saves and
is evaluated with its own tokenizer (the paper paired Qwen3-1.7B with Qwen2.5-Coder-0.5B)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from qwen3_chat import qwen3_style_tokenizer, save_qwen3_style_model  # noqa: E402

from mas_trainer.config import ConfigError, build_config  # noqa: E402

EXTRA = ("Say", "Answer", "digit")  # the "echo" model's own words: its prompts tokenize otherwise


def test_role_models_need_a_policy_per_role():
    with pytest.raises(ConfigError, match="policy_map per_role"):
        build_config(
            overrides=[
                "--algo.policy_map", "shared",  # the default preset is per_role
                "--model.role_models", '{"tool": "tiny:tiny"}',
            ]
        )  # fmt: skip


def test_a_team_of_two_tokenizers_trains_each_policy_on_its_own_tokens(tmp_path, monkeypatch):
    from test_train import FAST

    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.eval.play import run_eval
    from mas_trainer.learner import Learner
    from mas_trainer.outputs import RunDir
    from mas_trainer.policy import load_checkpoint_engines
    from mas_trainer.train import train

    caller_dir = save_qwen3_style_model(tmp_path / "caller-model", seed=0)
    echo_dir = save_qwen3_style_model(tmp_path / "echo-model", seed=1, extra_tokens=EXTRA)
    toks = {"caller": qwen3_style_tokenizer(), "echo": qwen3_style_tokenizer(EXTRA)}
    assert len(toks["caller"]) == 261 and len(toks["echo"]) == 264
    say_id = toks["echo"].convert_tokens_to_ids("Say")

    seen: list[tuple[int, list[int]]] = []  # (vocabulary of the model, prompt ids)
    generate, update, sft = (
        TransformersEngine.generate,
        Learner.update,
        Learner.sft_update,
    )

    def vocab(model):
        return model.get_input_embeddings().weight.shape[0]

    def spy_generate(self, prompts, params, seed=None):
        seen.extend((vocab(self.model), p) for p in prompts)
        return generate(self, prompts, params, seed=seed)

    def spy_update(self, samples):
        seen.extend((vocab(self.model), s.prompt_ids + s.completion_ids) for s in samples)
        return update(self, samples)

    def spy_sft(self, samples, lr=None):
        seen.extend((vocab(self.model), s.prompt_ids + s.completion_ids) for s in samples)
        return sft(self, samples, lr=lr)

    monkeypatch.setattr(TransformersEngine, "generate", spy_generate)
    monkeypatch.setattr(Learner, "update", spy_update)
    monkeypatch.setattr(Learner, "sft_update", spy_sft)
    cfg = build_config(
        "plan-path-tiny",
        overrides=[*FAST, "--run.out_dir", str(tmp_path), "--run.name", "team",
                   "--algo.policy_map", "per_role", "--model.name", str(caller_dir),
                   "--model.role_models", f'{{"echo": "{echo_dir}"}}'],
    )  # fmt: skip
    train(cfg)
    by_model = {n: [ids for v, ids in seen if v == n] for n in (261, 264)}
    assert by_model[261] and by_model[264] and len(seen) == len(by_model[261]) + len(by_model[264])
    # The echo model's prompts use its own "Say" token; the caller's stay within its vocabulary
    # and spell "Say" in bytes (the same text, other tokens).
    assert all(say_id in ids for ids in by_model[264])
    assert all(max(ids) < 261 and say_id not in ids for ids in by_model[261])
    assert all(
        any(ids[i : i + 3] == list(b"Say") for i in range(len(ids))) for ids in by_model[261]
    )

    ckpt = RunDir(tmp_path / "team").latest_checkpoint()
    _, tokenizers, policy_of = load_checkpoint_engines(ckpt, device="cpu", dtype=torch.float32)
    assert {n: len(t) for n, t in tokenizers.items()} == {"caller": 261, "echo": 264}
    assert policy_of == {"caller": "caller", "echo": "echo"}
    result = run_eval("digit_env:DigitEnv", str(tmp_path / "team"), episodes=3,
                      max_new_tokens=3)  # fmt: skip
    assert result["episodes"] == 3 and result["policy_of"] == policy_of
