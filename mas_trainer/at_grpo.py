"""AT-GRPO math as pure functions (torch only; no model, no I/O). Shapes are in the comments.

Exactly which variant (docs/algorithm.md, "AT-GRPO, exactly"; the paper's run settings are the
paper presets', docs/reproduce.md):

- **Advantage.** Per group g (samples sharing a group key ``(root env uid, turn, agent)``):
  ``A_i = (r_i - mean_g) / (std_g + eps)`` with the *unbiased* standard deviation (divisor n-1) and
  ``eps = 1e-6``. A group of one sample has no comparison and gets advantage 0 (its std is defined
  as 0). The advantage is broadcast to every completion token of the sample. Groups whose rewards
  are all equal have zero variance and carry no signal: :func:`zero_variance_groups` marks them, the
  trainer counts them (``algo/zero_var_groups``) and may drop them.
- **Group filters.** Besides zero-variance groups, a step may leave out the ``floor(G * share)``
  groups with the lowest mean reward (:func:`low_mean_groups`; the paper's code and math runs
  drop 30%) or the lowest reward std (:func:`low_std_groups`), ranked over all groups of the
  step. Groups are independent, so dropping some leaves the others' advantages unchanged.
- **Policy loss.** PPO-clip on per-token ratios ``rho = exp(logp - old_logp)``:
  ``l = max(-A rho, -A clip(rho, 1 - clip_low, 1 + clip_high))``; with dual-clip ``c`` (default 3,
  applied only where ``A < 0``) ``l = min(l, -A c)``, which bounds the loss of a token whose ratio
  exploded. Aggregation is the **token mean** over all completion tokens of the batch (padding
  excluded): ``sum(l * mask) / sum(mask)``, so long completions weigh per token, not per sample.
- **KL.** Optional, off by default: the k3 estimator ``exp(ref - logp) - (ref - logp) - 1`` per
  token (non-negative, unbiased for KL(pi || ref)), token mean over the mask, added as
  ``kl_coef * kl``.
- **Log-probs.** ``log softmax(logits / temperature)`` over the full vocabulary, optionally
  restricted to the top-p nucleus, i.e. exactly the distribution the engine samples from.

No entropy bonus (the paper uses none).

- **Supervised warm start.** Cross-entropy of the target tokens, a token mean *per role*, averaged
  over the roles in the batch (:func:`role_token_weights`): one role's long answers do not drown
  another's short ones in a shared policy. With one role it is the plain token mean.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch

from mas_trainer.samples import TrainSample


def group_advantages(
    rewards: torch.Tensor, group_index: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-normalised advantages.

    Args:
        rewards: ``(N,)`` float, one reward per sample.
        group_index: ``(N,)`` long in ``[0, G)``, the dense id of each sample's group.
        eps: Added to the group std before dividing.

    Returns:
        ``(advantages (N,), group_std (G,))``. Singleton groups have std 0 and advantage 0.
    """
    if rewards.shape != group_index.shape or rewards.dim() != 1:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} and group_index {tuple(group_index.shape)} "
            "must both be (N,)"
        )
    rewards = rewards.to(torch.float64)  # exact sums for the small groups we see
    n_groups = int(group_index.max().item()) + 1 if group_index.numel() else 0
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(
        0, group_index, torch.ones_like(rewards)
    )  # (G,)
    mean = torch.zeros(n_groups, dtype=torch.float64).index_add_(
        0, group_index, rewards
    ) / count.clamp(min=1)  # (G,)
    centered = rewards - mean[group_index]  # (N,)
    sq = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, centered**2)  # (G,)
    std = torch.where(
        count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), torch.zeros_like(sq)
    )  # (G,)
    adv = centered / (std[group_index] + eps)  # (N,)
    adv = torch.where(count[group_index] > 1, adv, torch.zeros_like(adv))  # singleton -> 0
    return adv.to(torch.float32), std.to(torch.float32)


def zero_variance_groups(
    rewards: torch.Tensor, group_index: torch.Tensor, tol: float = 1e-8
) -> torch.Tensor:
    """Which groups carry no learning signal (all rewards equal, or a single sample).

    Args:
        rewards: ``(N,)`` float.
        group_index: ``(N,)`` long in ``[0, G)``.
        tol: Groups whose reward range is at most ``tol`` count as zero-variance.

    Returns:
        ``(G,)`` bool; ``.sum()`` is the ``algo/zero_var_groups`` metric, and ``mask[group_index]``
        selects the samples to drop when dropping is on.
    """
    n_groups = int(group_index.max().item()) + 1 if group_index.numel() else 0
    r = rewards.to(torch.float64)
    hi = torch.full((n_groups,), -torch.inf, dtype=torch.float64).scatter_reduce(
        0, group_index, r, reduce="amax"
    )  # (G,)
    lo = torch.full((n_groups,), torch.inf, dtype=torch.float64).scatter_reduce(
        0, group_index, r, reduce="amin"
    )  # (G,)
    return (hi - lo) <= tol


def group_means(rewards: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """Mean reward of each group.

    Args:
        rewards: ``(N,)`` float.
        group_index: ``(N,)`` long in ``[0, G)``.

    Returns:
        ``(G,)`` float64 means (a singleton group's mean is its one reward).
    """
    n_groups = int(group_index.max().item()) + 1 if group_index.numel() else 0
    r = rewards.to(torch.float64)
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, r)  # (G,)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(
        0, group_index, torch.ones_like(r)
    )  # (G,)
    return total / count.clamp(min=1)


def lowest_share(values: torch.Tensor, share: float) -> torch.Tensor:
    """The ``floor(G * share)`` groups with the lowest ``values``; ties go to the earlier group.

    Args:
        values: ``(G,)`` one number per group (its mean reward, its reward std).
        share: In ``[0, 1)``.

    Returns:
        ``(G,)`` bool, true for the selected groups.
    """
    if not 0 <= share < 1:
        raise ValueError(f"share must be in [0, 1), got {share}")
    n_drop = int(values.numel() * share)  # floor, as the reference code's int(G * ratio)
    mask = torch.zeros(values.numel(), dtype=torch.bool)  # (G,)
    if n_drop:
        order = torch.sort(values, stable=True).indices  # (G,) ascending, ties by group id
        mask[order[:n_drop]] = True
    return mask


def low_mean_groups(rewards: torch.Tensor, group_index: torch.Tensor, share: float) -> torch.Tensor:
    """The paper's code/math group filter: the ``share`` of groups with the lowest mean reward.

    Groups are ranked over the whole step (all policies, turns and agents together);
    ``floor(G * share)`` are selected, ties broken by first appearance. The reference code drops
    30% (``filter_method: mean``); it ranked singleton groups as if their mean were 0, here a
    singleton ranks by its own reward (its advantage is 0 either way).

    Args:
        rewards: ``(N,)`` float.
        group_index: ``(N,)`` long in ``[0, G)``.
        share: In ``[0, 1)``.

    Returns:
        ``(G,)`` bool; ``.sum()`` is ``algo/groups_dropped_low_mean``, ``mask[group_index]``
        selects the samples to leave out.
    """
    return lowest_share(group_means(rewards, group_index), share)


def low_std_groups(rewards: torch.Tensor, group_index: torch.Tensor, share: float) -> torch.Tensor:
    """The ``share`` of groups with the lowest reward std (the std the advantage divides by).

    The unbiased std of :func:`group_advantages` (a singleton's is 0), ranked like
    :func:`low_mean_groups`. (The reference code's ``std`` mode ranked by variance over the
    squared reward range; the plain std ranks groups by the size of the signal they carry.)

    Args:
        rewards: ``(N,)`` float.
        group_index: ``(N,)`` long in ``[0, G)``.
        share: In ``[0, 1)``.

    Returns:
        ``(G,)`` bool; ``.sum()`` is ``algo/groups_dropped_low_std``.
    """
    _, std = group_advantages(rewards, group_index)  # (G,)
    return lowest_share(std, share)


def dense_group_index(keys: list[object]) -> torch.Tensor:
    """Map hashable group keys to dense ids ``0..G-1`` by first appearance: ``(N,)`` long."""
    ids: dict[object, int] = {}
    return torch.tensor([ids.setdefault(k, len(ids)) for k in keys], dtype=torch.long)


def advantages(
    samples: Sequence[TrainSample],
    *,
    eps: float = 1e-6,
    drop_zero_var: bool = False,
    drop_low_mean: float = 0.0,
    drop_low_std: float = 0.0,
) -> tuple[list[TrainSample], dict[str, float]]:
    """The samples to train on, each a copy with its AT-GRPO group advantage (key
    ``sample.group``) in ``advantage``; maybe drop groups. ``samples`` are left as they are.

    The three filters are each computed over all of the step's groups and the union is left
    out; the advantages of the groups kept do not change (groups are independent).

    Args:
        samples: One step's samples (rewards filled in), in any order.
        eps: Added to each group's std (``algo.adv_eps``).
        drop_zero_var: Leave the samples of zero-variance groups out of the returned list.
        drop_low_mean: Leave out the ``floor(G * share)`` groups with the lowest mean reward
            (:func:`low_mean_groups`; ``algo.drop_low_mean``, the paper's 0.3 for code and math).
        drop_low_std: Leave out the share of groups with the lowest reward std
            (:func:`low_std_groups`).

    Returns:
        The samples to train on, and the ``algo/*`` metrics (groups, zero-variance groups and
        their share, groups dropped by each filter and in all, ``algo/advantage_abs_mean`` of
        the samples trained (the name the learner gives it per policy), samples trained).
    """
    rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)  # (N,)
    index = dense_group_index([s.group for s in samples])  # (N,)
    adv, _ = group_advantages(rewards, index, eps=eps)  # (N,)
    zero = zero_variance_groups(rewards, index)  # (G,)
    low_mean = low_mean_groups(rewards, index, drop_low_mean)  # (G,)
    low_std = low_std_groups(rewards, index, drop_low_std)  # (G,)
    dropped = low_mean | low_std | (zero if drop_zero_var else torch.zeros_like(zero))  # (G,)
    keep = ~dropped[index]  # (N,)
    kept = [
        dataclasses.replace(s, advantage=a)
        for s, a, k in zip(samples, adv.tolist(), keep.tolist(), strict=True)
        if k
    ]
    metrics = {
        "algo/groups": float(zero.numel()),
        "algo/zero_var_groups": float(zero.sum()),
        "algo/zero_var_share": float(zero.float().mean()) if zero.numel() else 0.0,
        "algo/groups_dropped_low_mean": float(low_mean.sum()),
        "algo/groups_dropped_low_std": float(low_std.sum()),
        "algo/groups_dropped": float(dropped.sum()),
        "algo/advantage_abs_mean": float(adv[keep].abs().mean()) if kept else 0.0,
        "algo/samples_trained": float(len(kept)),
    }
    return kept, metrics


def top_p_filter(
    logits: torch.Tensor, top_p: float, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """Set logits outside the top-p nucleus to ``-inf``.

    The nucleus is the smallest set of highest-probability tokens whose probability sum reaches
    ``top_p`` (the token that crosses the threshold is included; the top token always is).

    Args:
        logits: ``(..., V)`` already divided by the temperature.
        top_p: In ``(0, 1]``; 1 returns ``logits`` unchanged.
        keep: Optional ``(...)`` long token ids that stay in the support even if outside the
            nucleus (the learner keeps the sampled token so its log-prob stays finite after the
            policy moved).

    Returns:
        ``(..., V)`` filtered logits.
    """
    if top_p >= 1.0:
        return logits
    if top_p <= 0.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    with torch.no_grad():  # the support is a choice, not a differentiable quantity
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V)
        probs = sorted_logits.float().softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # (..., V) probability above each token
        drop_sorted = mass_before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # (..., V)
        if keep is not None:
            drop.scatter_(-1, keep.unsqueeze(-1), False)
    return logits.masked_fill(drop, -torch.inf)


def token_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0, top_p: float = 1.0
) -> torch.Tensor:
    """Log-probabilities of ``tokens`` under ``softmax(logits / temperature)`` (optionally top-p).

    Args:
        logits: ``(B, T, V)`` (or ``(N, V)``) raw model logits at the positions that predict
            ``tokens``.
        tokens: ``(B, T)`` (or ``(N,)``) long.
        temperature: Sampling temperature (> 0).
        top_p: Nucleus mass; the sampled token is always kept in the support.

    Returns:
        ``(B, T)`` (or ``(N,)``) float32 log-probs.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    scaled = logits.float() / temperature  # (B, T, V)
    scaled = top_p_filter(scaled, top_p, keep=tokens)
    # gather - logsumexp avoids materialising a second (B, T, V) log_softmax tensor.
    picked = scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return picked - scaled.logsumexp(dim=-1)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over positions where ``mask`` is true; 0 for an empty mask. Any shape."""
    m = mask.to(values.dtype)
    return (values * m).sum() / m.sum().clamp(min=1.0)


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip policy loss with optional dual-clip, token mean over the mask.

    Args:
        logp: ``(B, T)`` log-probs under the current policy (with grad).
        old_logp: ``(B, T)`` log-probs under the policy that sampled (no grad).
        advantages: ``(B,)`` per sample (broadcast over tokens) or ``(B, T)`` per token.
        mask: ``(B, T)`` bool/0-1, true on completion tokens, false on padding.
        clip_low: Ratio lower clip ``1 - clip_low``.
        clip_high: Ratio upper clip ``1 + clip_high``.
        dual_clip: Constant ``c > 1`` bounding the loss of negative-advantage tokens at ``-A c``;
            None disables it.

    Returns:
        ``(loss, metrics)``: the scalar loss and ``algo/clip_frac_in_loss`` (tokens where the
        clipped branch was active), ``algo/dual_clip_frac``, ``algo/ratio_mean``,
        ``algo/approx_kl_in_loss`` (mean of ``old_logp - logp``), all token means. They describe
        the policy *before* this mini-batch's optimizer step (on the first mini-batch of an update
        the ratio is 1 and both are 0); :func:`policy_change` measures the update after it.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (typically 3), got {dual_clip}")
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages  # (B, 1) or (B, T)
    adv = adv.to(logp.dtype)
    mask = mask.to(torch.bool)
    log_ratio = (logp - old_logp).masked_fill(~mask, 0.0)  # (B, T); 0 on padding avoids inf*0
    ratio = log_ratio.exp()  # (B, T)
    unclipped = -adv * ratio  # (B, T)
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)  # (B, T)
    loss_tok = torch.maximum(unclipped, clipped)  # (B, T)
    dual_active = torch.zeros_like(mask)
    if dual_clip is not None:
        bound = -adv * dual_clip  # (B, T) or (B, 1), positive where adv < 0
        dual_active = (adv < 0) & (loss_tok > bound) & mask
        loss_tok = torch.where(adv < 0, torch.minimum(loss_tok, bound), loss_tok)
    loss = masked_mean(loss_tok, mask)
    with torch.no_grad():
        metrics = {
            "algo/clip_frac_in_loss": masked_mean((clipped > unclipped).float(), mask).item(),
            "algo/dual_clip_frac": masked_mean(dual_active.float(), mask).item(),
            "algo/ratio_mean": masked_mean(ratio, mask).item(),
            "algo/approx_kl_in_loss": masked_mean(-log_ratio, mask).item(),
        }
    return loss, metrics


def policy_change(
    new_logp: torch.Tensor, old_logp: torch.Tensor, clip_low: float, clip_high: float
) -> dict[str, float]:
    """How far an update moved the policy on the tokens it trained on (measured after it).

    Args:
        new_logp: ``(N,)`` log-probs of the sampled tokens after the update (all samples'
            completion tokens, concatenated).
        old_logp: ``(N,)`` the same tokens' log-probs before it.
        clip_low: PPO's lower clip (ratios below ``1 - clip_low`` count as clipped).
        clip_high: PPO's upper clip (ratios above ``1 + clip_high`` count as clipped).

    Returns:
        ``algo/approx_kl``: the k3 estimate ``mean((rho - 1) - log rho)`` of KL(old || new);
        ``algo/clip_frac``: the share of tokens whose ratio ``rho`` left the clip range.
    """
    log_ratio = new_logp - old_logp  # (N,)
    ratio = log_ratio.exp()  # (N,)
    if log_ratio.numel() == 0:
        return {"algo/approx_kl": 0.0, "algo/clip_frac": 0.0}
    outside = (ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)  # (N,)
    return {
        "algo/approx_kl": ((ratio - 1.0) - log_ratio).mean().item(),
        "algo/clip_frac": outside.float().mean().item(),
    }


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi || ref), token mean over the mask.

    Args:
        logp: ``(B, T)`` current policy log-probs of the sampled tokens (with grad).
        ref_logp: ``(B, T)`` reference policy log-probs of the same tokens.
        mask: ``(B, T)`` true on completion tokens.

    Returns:
        Scalar ``mean(exp(ref - logp) - (ref - logp) - 1)`` (>= 0 per token).
    """
    d = (ref_logp - logp).masked_fill(~mask.to(torch.bool), 0.0)  # (B, T)
    # Clamp before exp: a token the reference finds far likelier would otherwise overflow.
    return masked_mean(d.clamp(max=20.0).exp() - d - 1.0, mask)


def role_token_counts(roles: Sequence[str], n_tokens: Sequence[int]) -> dict[str, int]:
    """``role -> target tokens`` of a supervised batch (what :func:`role_token_weights` divides by).

    Args:
        roles: ``(N,)`` each sample's role.
        n_tokens: ``(N,)`` each sample's target tokens.
    """
    per_role: dict[str, int] = {}
    for role, n in zip(roles, n_tokens, strict=True):
        per_role[role] = per_role.get(role, 0) + n
    return per_role


def role_token_weights(
    roles: Sequence[str], n_tokens: Sequence[int], role_tokens: Mapping[str, int] | None = None
) -> list[float]:
    """Per-token weight of each sample so that every role weighs the same in a supervised batch.

    A plain token mean over a shared policy's batch lets a role with long answers (a tool's
    program) drown one with short answers (a planner's move list). With these weights the loss
    ``sum_i w_i * sum_t nll_it`` is the mean over the batch's roles of each role's token mean.

    Args:
        roles: ``(N,)`` each sample's role.
        n_tokens: ``(N,)`` each sample's target tokens.
        role_tokens: Each role's target tokens in the whole batch where these samples are only
            part of it (a data-parallel rank's share); default: :func:`role_token_counts` of
            these samples.

    Returns:
        ``(N,)`` weights ``1 / (roles in the batch * target tokens of the sample's role)``.
    """
    per_role = role_token_counts(roles, n_tokens) if role_tokens is None else role_tokens
    return [1.0 / (len(per_role) * max(per_role[r], 1)) for r in roles]


def weighted_sft_loss(
    logp: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of the target tokens, each sample's tokens weighted by ``weights``.

    Args:
        logp: ``(B, T)`` log-probs (temperature 1) of the target completion tokens.
        mask: ``(B, T)`` true on completion tokens.
        weights: ``(B,)`` per-token weight of each sample (:func:`role_token_weights`).

    Returns:
        Scalar ``-sum(weights * logp)`` over the mask.
    """
    m = mask.to(logp.dtype)
    return -(logp * m * weights.to(logp.dtype).unsqueeze(-1)).sum()


def sft_loss(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the target tokens, token mean over the mask.

    Args:
        logp: ``(B, T)`` log-probs (temperature 1) of the target completion tokens.
        mask: ``(B, T)`` true on completion tokens.

    Returns:
        Scalar ``-mean(logp)`` over the mask.
    """
    return -masked_mean(logp, mask)
