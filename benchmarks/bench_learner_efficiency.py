"""How much work ``Learner.update`` does per trained token, against one forward + backward.

Printed side by side, in one run:

1. **FLOPs per trained token / (forward + backward FLOPs)**, counted by
   ``torch.utils.flop_counter.FlopCounterMode`` (exact matmul / attention FLOPs of the ops that
   ran, independent of the machine's load; attention counted as torch counts the GPU kernels,
   every query against every key, :data:`CPU_ATTENTION`). The floor is one forward and one
   backward over every sample's prompt + completion tokens, unpadded, each sample alone (the LM
   head over every position, as a plain ``model(ids).logits`` loss does). Rows: the learner's
   defaults; with gradient checkpointing (the paper presets' setting: the recompute is one more
   forward), where each distinct prompt runs once and its completions on its keys and values
   (the cache survives the checkpointed replay), and with prompts not shared; with a quarter of
   the samples re-scored after the update (``measure_change=0.25``; the default re-scores all);
   without prompt sharing. The attention part of each is printed beside it.
2. **Padding**: the share of the token slots in the learner's micro-batches that are padding, at
   the paper presets' batch shape (mini-batch 64 = 16 prompts x K 4, micro-batch 4) and lengths
   drawn uniformly in [max/2, max] (``--paper-prompt-len``, ``--paper-completion-len``: 4096
   response tokens of Plan-Path and Sudoku). No real length distribution of a paper run is at
   hand here: this is an assumption. Collation only (no model runs), so paper lengths are cheap.
   Then, for the fallback where transformers drops the cache under checkpointing (no
   ``_can_checkpoint_with_cache``), the forward FLOPs the learner estimates for those lengths, a
   row per sample against packed groups, at Qwen3-1.7B's shape and the benchmark's: the cheaper
   is the layout it runs there.
3. **Peak logits memory**: the largest tensor whose last dimension is the whole vocabulary that
   the update creates, against the ``(b, Tc, V)`` fp32 logits of its largest micro-batch; and the
   same two figures at Qwen3's vocabulary and the paper's micro-batch (4 x 4096 tokens).
4. **Tokens/s** of ``Learner.update`` over a bare fwd/bwd/AdamW loop on the same samples and
   mini-batch (``benchmarks/bench_learner.py``'s loop: pre-padded tensors, ``model(ids).logits``,
   masked cross-entropy, backward, AdamW), and under gradient checkpointing with prompts run once
   against prompts not shared; medians of ``--repeats`` alternating runs. Wall time: it depends
   on the machine's load, unlike the three figures above (``--repeats 0`` skips it).
5. **At Qwen3-1.7B's shape** (no GPU: the model on fake tensors, ``FakeTensorMode``), one
   mini-batch of 64 at the paper lengths above: the PPO pass (the learner's micro-batches,
   forward, recompute, backward) and a no-grad scoring pass, per trained token over the floor,
   with every layer checkpointed, none, every layer selectively checkpointed
   (``model.checkpoint_mode selective``), and ``model.checkpoint_layers auto`` as the memory plan
   chooses it for the per-role and shared 1.7B presets in either mode. Totals: the PPO pass plus
   the scoring of the mini-batches after the first, at n = 1 and 8 mini-batches an update, then
   with every sample re-scored after the update (``measure_change=1``, the default). Counted at
   1 and 2 layers and extrapolated per layer (checked against a whole count at 4 layers).

Usage:
    python benchmarks/bench_learner_efficiency.py                   # tiny model, K=4 groups
    python benchmarks/bench_learner_efficiency.py --preset small --samples 16
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from bench_learner import bare_batches, bare_step, make_samples
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import (
    FlopCounterMode,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

import mas_trainer.learner as learner_mod
from mas_trainer.learner import Learner, _LayoutCost
from mas_trainer.models import build_tiny_model, tiny_config, tiny_tokenizer
from mas_trainer.samples import TrainSample

QWEN3_VOCAB = 151_936


def _cpu_attention(query: Any, key: Any, value: Any, *_: Any, **__: Any) -> int:
    return sdpa_flop_count(query, key, value)


def _cpu_attention_backward(grad: Any, query: Any, key: Any, value: Any, *_: Any, **__: Any) -> int:
    return sdpa_backward_flop_count(grad, query, key, value)


#: torch counts the GPU attention kernels but not the CPU's: the same formulas for it (every
#: query against every key: a causal or masked pass counts the masked pairs too, as on the GPU).
CPU_ATTENTION = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_attention_backward,
}


def count_flops(fn: Any, attention: bool = False) -> Any:
    """FLOPs of the ops ``fn`` runs (forward and backward); with ``attention``, also the share
    of them in attention kernels: ``(total, attention)``."""
    with FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION) as counter:
        fn()
    total = counter.get_total_flops()
    if not attention:
        return total
    ops = counter.get_flop_counts()["Global"]
    return total, sum(v for op, v in ops.items() if "attention" in str(op))


def floor_flops(model: Any, samples: list[TrainSample], attention: bool = False) -> Any:
    """One forward + backward over each sample's tokens, alone and unpadded (with ``attention``:
    ``(total, attention)``, as :func:`count_flops`)."""

    def run() -> None:
        for s in samples:
            ids = torch.tensor([s.prompt_ids + s.completion_ids])
            logits = model(input_ids=ids, use_cache=False).logits[0, :-1]  # (L-1, V)
            torch.nn.functional.cross_entropy(logits, ids[0, 1:]).backward()
        model.zero_grad(set_to_none=True)

    return count_flops(run, attention)


def padding_share(learner: Learner, samples: list[TrainSample]) -> float:
    """Padding slots / all slots of the learner's micro-batches over one update's mini-batches."""
    slots = real = 0
    blocks: list[Any] = []
    for mini in learner._mini_batches(samples):
        for batch in learner._micro_batches(samples, mini):
            rows = [samples[i] for i in batch.index]
            if batch.prompts is not None:  # each block's prompt pass once, then completions
                states = batch.prompts.states
                if states not in blocks:
                    blocks.append(states)
                    slots += len(states.prompts) * max(len(p) for p in states.prompts)
                    real += sum(len(p) for p in states.prompts)
                slots += batch.targets.numel()
                real += sum(len(s.completion_ids) for s in rows)
            elif batch.packed is not None:  # one row per distinct prompt and its completions
                slots += batch.input_ids.numel()
                real += int((batch.packed.segments >= 0).sum())
            elif batch.prefix is None:
                slots += batch.input_ids.numel()
                real += sum(s.num_tokens for s in rows)
            else:  # each distinct prompt once, plus the completions
                slots += batch.prefix.ids.numel() + batch.targets.numel()
                real += int(batch.prefix.mask.sum()) + sum(len(s.completion_ids) for s in rows)
    return 1.0 - real / slots


def layout_flops(preset: str, batch: list[TrainSample], micro: int) -> tuple[float, float]:
    """Forward FLOPs the learner estimates (``_LayoutCost``, what it chooses the layout by) for a
    mini-batch under gradient checkpointing, in micro-batches of a row per sample (by length) and
    of a row per group (packed), at a preset's shape (built on the meta device: no weights)."""
    from transformers import Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(tiny_config(preset, tiny_tokenizer(preset)))
    cost = _LayoutCost.of(model)

    def chunks(order: list[int]) -> list[list[int]]:
        return [order[s : s + micro] for s in range(0, len(order), micro)]

    index = range(len(batch))
    by_length = sorted(index, key=lambda i: batch[i].num_tokens)
    by_prompt = sorted(index, key=lambda i: (len(batch[i].prompt_ids), batch[i].prompt_ids))
    plain = sum(
        cost(len(c), max(batch[i].num_tokens for i in c), dense=False) for c in chunks(by_length)
    )
    packed = sum(Learner._packed_cost(batch, c, cost) for c in chunks(by_prompt))
    return plain, packed


def _fake_model(shape: Any, layers: int) -> Any:
    """A Qwen3 model of ``shape`` cut to ``layers`` decoder layers, on fake tensors (no storage:
    FLOPs are counted from the shapes alone)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import Qwen3ForCausalLM

    with FakeTensorMode(allow_non_fake_inputs=True) as fake:
        model = Qwen3ForCausalLM(shape.hf_config(layers))
    model.fake_mode = fake
    return model


def shape_flops(
    shape: Any,
    batch: list[TrainSample],
    micro: int,
    checkpointed: int,
    plain: int,
    mode: str = "full",
    passes: tuple[str, ...] = ("train", "score", "floor"),
) -> dict[str, float]:
    """FLOPs of the learner's passes over ``batch`` (one mini-batch) at a model ``shape`` of
    ``checkpointed`` + ``plain`` decoder layers (``plain`` ones selectively checkpointed with
    ``mode`` ``selective``), counted on fake tensors: ``train`` (the PPO pass: forward,
    recompute, backward, the learner's own micro-batches and code path), ``score`` (a no-grad
    scoring pass over the same samples, as ``Learner.update`` scores them) and ``floor`` (one
    fwd+bwd per sample, unpadded, the LM head on every position, as :func:`floor_flops`)."""
    layers = checkpointed + plain
    model = _fake_model(shape, layers)
    learner = Learner(
        model, lr=1e-6, mini_batch_size=len(batch), micro_batch_size=micro, pad_token_id=0,
        temperature=0.6, dtype=torch.bfloat16, checkpoint_layers=checkpointed,
        gradient_checkpointing=checkpointed > 0 or mode == "selective", checkpoint_mode=mode,
    )  # fmt: skip
    out = {}
    with model.fake_mode:

        def train() -> None:
            for b in learner._micro_batches(batch, list(range(len(batch)))):
                (learner._logprobs(b)[0] * b.mask).sum().backward()

        if "train" in passes:
            out["train"] = count_flops(train)
        if "score" in passes:
            out["score"] = count_flops(lambda: learner._score(batch))
    if "floor" in passes:
        floor = _fake_model(shape, layers)
        with floor.fake_mode:
            out["floor"] = floor_flops(floor, batch)
    return out


def extrapolated_flops(
    shape: Any, batch: list[TrainSample], micro: int, checkpointed: int, mode: str = "full",
    counted: dict[tuple[int, int, str], dict[str, float]] | None = None,
) -> dict[str, float]:  # fmt: skip
    """:func:`shape_flops` at ``shape.layers`` layers (the first ``checkpointed`` checkpointed,
    the rest as ``mode`` has them), from counts at 1 and 2 layers: FLOPs are linear in each kind
    of layer's count. ``counted`` keeps the counts for the next call (the same batch)."""
    counted = {} if counted is None else counted

    def at(c: int, p: int) -> dict[str, float]:
        key = (c, p, mode if p else "full")
        if key not in counted:
            counted[key] = shape_flops(shape, batch, micro, c, p, key[2])
        return counted[key]

    base, one_more, plain = at(1, 0), at(2, 0), at(1, 1)
    extra_plain = shape.layers - checkpointed
    return {
        k: base[k]
        + (checkpointed - 1) * (one_more[k] - base[k])
        + extra_plain * (plain[k] - base[k])
        for k in base
    }


def paper_shape(args: Any) -> None:
    """Part 5: FLOPs per trained token / floor at Qwen3-1.7B's shape and the paper's lengths."""
    from mas_trainer.config import build_config
    from mas_trainer.plan import QWEN3_SHAPES, ModelShape, plan_run

    shape = QWEN3_SHAPES["Qwen/Qwen3-1.7B"]
    print("5. FLOPs per trained token / floor at Qwen3-1.7B's shape, paper lengths (fake tensors)")
    small = ModelShape(**{**vars(shape), "layers": 4})
    check = make_samples(8, 64, 128, seed=0, group_size=4)
    checked: dict[tuple[int, int, str], dict[str, float]] = {}
    for mode in ("full", "selective"):
        full = shape_flops(small, check, 4, 3, 1, mode, passes=("train",))
        extra = extrapolated_flops(small, check, 4, 3, mode, checked)
        print(
            f"   check at 4 layers (3 checkpointed, 1 {'plain' if mode == 'full' else mode}), "
            f"8 short samples: counted {full['train']:.4g}, extrapolated from 1-2 layers "
            f"{extra['train']:.4g} FLOPs"
        )
    batch = make_samples(64, args.paper_prompt_len, args.paper_completion_len, seed=0, group_size=4)
    choices = {("all (the default)", "full"): shape.layers, ("none", "full"): 0,
               ("selective: all", "selective"): 0}  # fmt: skip
    for mode in ("full", "selective"):
        for preset in ("plan-path-qwen3-1.7b", "plan-path-qwen3-1.7b-shared"):
            over = ["--model.checkpoint_layers", "auto", "--model.checkpoint_mode", mode,
                    "--optim.micro_batch_size", "4"]  # fmt: skip
            layers = plan_run(build_config(preset, overrides=over)).checkpoint_layers
            label = f"{'selective, ' if mode == 'selective' else ''}auto, {preset}"
            choices[(label, mode)] = shape.layers if layers is None else layers
    print(
        f"   mini-batch of 64 (prompts {args.paper_prompt_len // 2}-{args.paper_prompt_len}, "
        f"completions {args.paper_completion_len // 2}-{args.paper_completion_len}), "
        "micro-batch 4: the PPO pass, a no-grad scoring pass, and their sum with n mini-batches "
        "an update (each sample scored before the update but the first mini-batch's), then with "
        "every sample re-scored after it (measure_change=1, the default)"
    )
    counted: dict[tuple[int, int, str], dict[str, float]] = {}
    for (name, mode), ckpt in choices.items():
        f = extrapolated_flops(shape, batch, 4, ckpt, mode, counted)
        train, score = f["train"] / f["floor"], f["score"] / f["floor"]
        own = "  ".join(f"n={n}: {train + (1 - 1 / n) * score:.2f}" for n in (1, 8))
        rescored = "  ".join(f"n={n}: {train + (2 - 1 / n) * score:.2f}" for n in (1, 8))
        print(
            f"   {ckpt:2d} of {shape.layers} full, {name:45s} PPO {train:.3f}  scoring "
            f"{score:.3f}  total {own}  re-scored {rescored}",
            flush=True,
        )
    print(
        "   the 1.7B presets as they ship (their micro-batch, checkpointing and "
        "algo.measure_change: the share of samples re-scored after the update)"
    )
    shipped: dict[int, dict[tuple[int, int, str], dict[str, float]]] = {}
    for preset in ("plan-path-qwen3-1.7b", "plan-path-qwen3-1.7b-shared"):
        cfg = build_config(preset)
        layers = plan_run(cfg).checkpoint_layers
        ckpt = shape.layers if layers is None else layers
        micro, mode, share = (
            cfg.optim.micro_batch_size, cfg.model.checkpoint_mode, cfg.algo.measure_change
        )  # fmt: skip
        f = extrapolated_flops(shape, batch, micro, ckpt, mode, shipped.setdefault(micro, {}))
        train, score = f["train"] / f["floor"], f["score"] / f["floor"]
        total = "  ".join(f"n={n}: {train + (1 - 1 / n + share) * score:.2f}" for n in (1, 8))
        print(
            f"   {ckpt:2d} of {shape.layers} full, the rest {mode}, micro-batch {micro}, "
            f"re-scored {share:g}: {preset:28s} PPO {train:.3f}  scoring {score:.3f}  "
            f"total {total}",
            flush=True,
        )


class VocabWide(TorchDispatchMode):
    """Records the bytes of the largest op output that holds logits: last dimension the whole
    vocabulary or one block of it (``chunk``), first dimension not the vocabulary (the LM
    head's weight and gradient are (V, H); its transpose (H, V) is left out too)."""

    def __init__(self, vocab: int, chunk: int, hidden: int) -> None:
        super().__init__()
        self.vocab, self.chunk, self.hidden, self.largest = vocab, chunk, hidden, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else [out]:
            if not isinstance(t, torch.Tensor) or t.dim() < 2:
                continue
            if t.shape[-1] in (self.vocab, self.chunk) and t.shape[0] not in (
                self.vocab,
                self.hidden,
            ):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=4, help="K: samples sharing one prompt")
    ap.add_argument("--prompt-len", type=int, default=96, help="max prompt tokens (FLOP run)")
    ap.add_argument("--completion-len", type=int, default=64, help="max completion tokens")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument(
        "--vocab-chunk", type=int, default=48, help="VOCAB_CHUNK here (no other dim of the model)"
    )
    ap.add_argument("--paper-prompt-len", type=int, default=1024)
    ap.add_argument("--paper-completion-len", type=int, default=4096)
    ap.add_argument("--paper-seeds", type=int, default=5, help="batches drawn for the padding")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of part 4")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    default_chunk = learner_mod.VOCAB_CHUNK
    learner_mod.VOCAB_CHUNK = args.vocab_chunk  # several blocks even of a tiny vocabulary

    samples = make_samples(
        args.samples, args.prompt_len, args.completion_len, seed=0, group_size=args.group_size
    )
    tokens = sum(s.num_tokens for s in samples)
    model, tok = build_tiny_model(args.preset, seed=0)
    vocab = model.config.vocab_size
    common: dict[str, Any] = dict(
        lr=1e-6, mini_batch_size=len(samples), micro_batch_size=args.micro_batch,
        pad_token_id=tok.pad_token_id, temperature=0.6,
    )  # fmt: skip
    floor, floor_attn = (f / tokens for f in floor_flops(model, samples, attention=True))
    print(
        f"preset={args.preset} samples={args.samples} K={args.group_size} tokens/update={tokens} "
        f"micro_batch={args.micro_batch} vocab={vocab} vocab_chunk={args.vocab_chunk}"
    )
    print(
        f"floor: one fwd+bwd, unpadded        {floor / 1e6:9.2f} MFLOP/token "
        f"(attention {floor_attn / 1e6:.2f})"
    )
    print("1. FLOPs per trained token / floor")
    rows = {
        "Learner.update (defaults)": {},
        "  + gradient checkpointing (prompts run once)": {"gradient_checkpointing": True},
        "  + gradient checkpointing, prompts not shared": {
            "gradient_checkpointing": True,
            "share_prompts": False,
        },
        "  measure_change=0.25 (a quarter re-scored)": {"measure_change": 0.25},
        "  no prompt sharing at all": {"share_prompts": False},
    }
    for name, extra in rows.items():
        m, _ = build_tiny_model(args.preset, seed=0)
        learner = Learner(m, **{**common, **extra})
        flops, attn = count_flops(lambda lr=learner: lr.update(samples), attention=True)
        print(
            f"   {name:46s} {flops / tokens / 1e6:6.2f} MFLOP/token "
            f"(attention {attn / tokens / 1e6:5.2f})   ratio {flops / tokens / floor:.3f}"
        )

    print("2. padding share of the micro-batch slots (paper batch shape, assumed lengths)")
    paper: dict[str, Any] = dict(lr=1e-6, mini_batch_size=64, micro_batch_size=4, pad_token_id=0)
    for label, extra in [
        ("prompts run once (checkpointing or not)", {"gradient_checkpointing": True}),
        ("a row per sample (share_prompts=False)", {"share_prompts": False}),
    ]:
        shares = []
        for seed in range(args.paper_seeds):
            batch = make_samples(
                64, args.paper_prompt_len, args.paper_completion_len, seed=seed, group_size=4
            )
            m, _ = build_tiny_model("tiny", seed=0)
            learner = Learner(m, **{**paper, **extra})
            shares.append(padding_share(learner, batch))
        print(f"   {label:40s} {statistics.mean(shares):6.1%} (max {max(shares):.1%})")
    for preset in ("qwen3-1.7b-shape", args.preset):
        plain, packed = layout_flops(preset, batch, micro=4)
        chosen = "packed groups" if packed < plain else "a row per sample"
        print(
            f"   these lengths, checkpointing, {preset}: forward {plain / 1e12:.1f} TFLOP with a "
            f"row per sample, {packed / 1e12:.1f} packed ({packed / plain:.2f}x): {chosen} chosen"
        )

    print("3. peak logits memory")
    m, _ = build_tiny_model(args.preset, seed=0)
    learner = Learner(m, **common)
    spy = VocabWide(vocab, args.vocab_chunk, m.config.hidden_size)
    with spy:
        learner.update(samples)
    mb = max(
        len(b.index) * b.targets.shape[1]
        for b in learner._micro_batches(samples, list(range(len(samples))))
    )
    full = mb * vocab * 4
    print(
        f"   measured: largest vocabulary-wide tensor {spy.largest / 1e3:.1f} kB, "
        f"whole fp32 logits of the largest micro-batch {full / 1e3:.1f} kB "
        f"({spy.largest / full:.2f}x)"
    )
    paper_tokens = 4 * args.paper_completion_len
    print(
        f"   at Qwen3's vocabulary, 4 x {args.paper_completion_len} tokens: "
        f"{paper_tokens * default_chunk * 4 / 1e9:.2f} GB per block (VOCAB_CHUNK "
        f"{default_chunk}) vs {paper_tokens * QWEN3_VOCAB * 4 / 1e9:.2f} GB of whole logits"
    )
    if args.repeats:
        throughput(args, samples, common, tokens)
    # The learner's own vocabulary blocks at Qwen3's vocabulary (the same FLOPs in any block
    # size; the tiny model's 48 would make 3,166 blocks of ops to count).
    learner_mod.VOCAB_CHUNK = default_chunk
    paper_shape(args)


def throughput(args: Any, samples: list[TrainSample], common: dict[str, Any], tokens: int) -> None:
    model, tok = build_tiny_model(args.preset, seed=0)
    model.train()
    batches = bare_batches(samples, len(samples), tok.pad_token_id)
    bare_opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
    learner = Learner(model, **common)
    checkpointed = {
        share: Learner(m, **common, gradient_checkpointing=True, share_prompts=share)
        for share, m in ((True, build_tiny_model(args.preset, seed=0)[0]),
                         (False, build_tiny_model(args.preset, seed=0)[0]))
    }  # fmt: skip
    runs = {
        "bare fwd/bwd/AdamW": lambda: bare_step(model, bare_opt, batches, extra_forward=False),
        "Learner.update": lambda: learner.update(samples),
        "  checkpointing (prompts run once)": lambda: checkpointed[True].update(samples),
        "  checkpointing, prompts not shared": lambda: checkpointed[False].update(samples),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(args.repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("4. tokens/s (wall time: depends on the machine's load)")
    for name, t in med.items():
        print(f"   {name:34s} {tokens / t:9.0f} tok/s")
    ratio = med["bare fwd/bwd/AdamW"] / med["Learner.update"]
    print(f"   Learner.update / bare               {ratio:.2f}x the tokens/s")
    once = med["  checkpointing, prompts not shared"] / med["  checkpointing (prompts run once)"]
    print(f"   checkpointing: prompts once / not   {once:.2f}x the tokens/s")


if __name__ == "__main__":
    main()
