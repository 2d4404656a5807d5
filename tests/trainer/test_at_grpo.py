"""AT-GRPO math against hand-computed values (mas_trainer/at_grpo.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")

from mas_trainer.at_grpo import (  # noqa: E402
    advantages,
    dense_group_index,
    group_advantages,
    group_means,
    kl_k3,
    low_mean_groups,
    low_std_groups,
    lowest_share,
    masked_mean,
    policy_change,
    ppo_clip_loss,
    role_token_weights,
    sft_loss,
    token_logprobs,
    top_p_filter,
    weighted_sft_loss,
    zero_variance_groups,
)


def t(x: list) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


# ------------------------------------------------------------------ advantages

# group 0: [1, 0, 0, 1] mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3)
# group 1: [7] singleton -> 0
# group 2: [2, 2] zero variance -> 0
# group 3: [0, 3] mean 1.5, unbiased std sqrt(2 * 2.25 / 1) = 2.1213
REWARDS = [1.0, 0.0, 0.0, 1.0, 7.0, 2.0, 2.0, 0.0, 3.0]
GROUPS = [0, 0, 0, 0, 1, 2, 2, 3, 3]


def test_group_advantages_hand_computed() -> None:
    adv, std = group_advantages(t(REWARDS), torch.tensor(GROUPS))
    s0, s3 = math.sqrt(1 / 3), math.sqrt(4.5)
    a0, a3 = 0.5 / (s0 + 1e-6), 1.5 / (s3 + 1e-6)
    expected = [a0, -a0, -a0, a0, 0.0, 0.0, 0.0, -a3, a3]
    assert adv.tolist() == pytest.approx(expected, abs=1e-6)
    assert std.tolist() == pytest.approx([s0, 0.0, 0.0, s3], abs=1e-6)


def test_group_advantages_eps_is_added_to_std() -> None:
    adv, _ = group_advantages(t([0.0, 1.0]), torch.tensor([0, 0]), eps=1.0)
    # std of [0, 1] (unbiased) = sqrt(0.5); A = +-0.5 / (sqrt(0.5) + 1)
    a = 0.5 / (math.sqrt(0.5) + 1.0)
    assert adv.tolist() == pytest.approx([-a, a], abs=1e-6)


def test_group_advantages_groups_are_independent_of_order() -> None:
    perm = [8, 3, 1, 6, 0, 4, 7, 2, 5]
    adv, _ = group_advantages(t(REWARDS), torch.tensor(GROUPS))
    adv_p, _ = group_advantages(
        t([REWARDS[i] for i in perm]), torch.tensor([GROUPS[i] for i in perm])
    )
    assert adv_p.tolist() == pytest.approx([adv[i].item() for i in perm], abs=1e-6)


def test_group_advantages_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="must both be"):
        group_advantages(t([1.0, 2.0]), torch.tensor([0]))


def test_zero_variance_groups_counts_constant_and_singleton_groups() -> None:
    zero = zero_variance_groups(t(REWARDS), torch.tensor(GROUPS))
    assert zero.tolist() == [False, True, True, False]
    assert int(zero.sum()) == 2
    # Drop mask for samples: exactly the singleton and the constant group's samples.
    assert zero[torch.tensor(GROUPS)].tolist() == [False] * 4 + [True] * 3 + [False] * 2


def test_dense_group_index_by_first_appearance() -> None:
    keys = [("e1", 0, "a"), ("e1", 0, "b"), ("e1", 0, "a"), ("e2", 1, "a")]
    assert dense_group_index(keys).tolist() == [0, 1, 0, 2]


# ------------------------------------------------------------------ PPO-clip


def _ratios_to_logp(ratios: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    old = torch.zeros(len(ratios), len(ratios[0]))
    return torch.log(t(ratios)), old


def test_ppo_clip_loss_hand_computed_with_dual_clip() -> None:
    # Sample 0, A=+1: ratios 1.5 (clipped to 1.2 -> -1.2), 0.5 (unclipped -0.5 is the max).
    # Sample 1, A=-1: ratios 0.5 (clipped 0.8 -> 0.8), 5.0 (PPO 5.0, dual-clip caps at 3.0),
    #                 2.0 (2.0 < 3: dual clip inactive).
    logp, old = _ratios_to_logp([[1.5, 0.5, 1.0], [0.5, 5.0, 2.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    logp[0, 2] = 50.0  # padding with a huge ratio must not count
    loss, m = ppo_clip_loss(logp, old, t([1.0, -1.0]), mask)
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 3.0 + 2.0) / 5, abs=1e-5)
    # The clipped branch wins for ratio 1.5 (A>0) and ratio 0.5 (A<0); ratio 5 is the dual clip's.
    assert m["algo/clip_frac_in_loss"] == pytest.approx(2 / 5)
    assert m["algo/dual_clip_frac"] == pytest.approx(1 / 5)
    assert m["algo/ratio_mean"] == pytest.approx((1.5 + 0.5 + 0.5 + 5.0 + 2.0) / 5, abs=1e-5)


def test_ppo_clip_loss_without_dual_clip() -> None:
    logp, old = _ratios_to_logp([[5.0]])
    loss, _ = ppo_clip_loss(logp, old, t([-1.0]), torch.tensor([[True]]), dual_clip=None)
    assert loss.item() == pytest.approx(5.0, abs=1e-5)
    loss, _ = ppo_clip_loss(logp, old, t([-1.0]), torch.tensor([[True]]), dual_clip=3.0)
    assert loss.item() == pytest.approx(3.0, abs=1e-5)


def test_ppo_clip_loss_asymmetric_clip() -> None:
    logp, old = _ratios_to_logp([[1.5]])
    loss, _ = ppo_clip_loss(
        logp, old, t([2.0]), torch.tensor([[True]]), clip_low=0.2, clip_high=0.28
    )
    assert loss.item() == pytest.approx(-2.0 * 1.28, abs=1e-5)


def test_ppo_clip_loss_is_token_mean_not_sample_mean() -> None:
    # On-policy (ratio 1): loss = -mean over tokens of A. Sample 0 has 3 tokens with A=1,
    # sample 1 one token with A=-1 -> (-3 + 1) / 4, not (-1 + 1) / 2.
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[True, True, True], [True, False, False]])
    loss, _ = ppo_clip_loss(logp, logp.clone(), t([1.0, -1.0]), mask)
    assert loss.item() == pytest.approx(-0.5)


def test_ppo_clip_loss_gradient_on_policy_is_minus_advantage_over_tokens() -> None:
    logp = torch.zeros(2, 2, requires_grad=True)
    mask = torch.tensor([[True, True], [True, False]])
    loss, _ = ppo_clip_loss(logp, torch.zeros(2, 2), t([2.0, -1.0]), mask)
    loss.backward()
    assert logp.grad is not None
    assert logp.grad.flatten().tolist() == pytest.approx([-2 / 3, -2 / 3, 1 / 3, 0.0], abs=1e-6)


def test_ppo_clip_loss_per_token_advantages() -> None:
    logp = torch.zeros(1, 2)
    loss, _ = ppo_clip_loss(logp, logp, t([[1.0, 3.0]]), torch.ones(1, 2, dtype=torch.bool))
    assert loss.item() == pytest.approx(-2.0)


def test_ppo_clip_loss_rejects_bad_dual_clip() -> None:
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_clip_loss(
            torch.zeros(1, 1), torch.zeros(1, 1), t([1.0]), torch.ones(1, 1), dual_clip=1.0
        )


# ------------------------------------------------------------------ KL, log-probs, SFT


def test_kl_k3_hand_computed() -> None:
    # d = ref - logp: log 2 -> 2 - log 2 - 1; 0 -> 0; the padded position is ignored.
    logp = t([[0.0, -1.0, 3.0]])
    ref = t([[math.log(2.0), -1.0, -40.0]])
    mask = torch.tensor([[True, True, False]])
    assert kl_k3(logp, ref, mask).item() == pytest.approx((1 - math.log(2.0)) / 2, abs=1e-6)


def test_kl_k3_is_zero_for_identical_policies_and_nonnegative() -> None:
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(3, 4, generator=g)
    mask = torch.ones(3, 4, dtype=torch.bool)
    assert kl_k3(logp, logp, mask).item() == 0.0
    assert kl_k3(logp, -torch.rand(3, 4, generator=g), mask).item() > 0.0


def test_token_logprobs_temperature() -> None:
    logits = t([[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]])  # (1, 2, 3)
    got = token_logprobs(logits, torch.tensor([[2, 0]]), temperature=2.0)
    z = math.exp(0.5) + math.exp(1.0) + math.exp(1.5)
    assert got.flatten().tolist() == pytest.approx([1.5 - math.log(z), -math.log(3.0)], abs=1e-6)


def test_top_p_keeps_the_nucleus_and_renormalises() -> None:
    probs = t([0.5, 0.3, 0.15, 0.05])
    logits = probs.log()
    # Mass above token 1 is 0.5 < 0.7: kept; above token 2 is 0.8 >= 0.7: dropped.
    filtered = top_p_filter(logits, 0.7)
    assert torch.isinf(filtered[2:]).all() and torch.isfinite(filtered[:2]).all()
    lp = token_logprobs(logits.view(1, 1, 4), torch.tensor([[0]]), top_p=0.7)
    assert lp.item() == pytest.approx(math.log(0.5 / 0.8), abs=1e-6)
    # The scored token is always kept, so a learner that moved still has a finite log-prob.
    lp2 = token_logprobs(logits.view(1, 1, 4), torch.tensor([[2]]), top_p=0.7)
    assert lp2.item() == pytest.approx(math.log(0.15 / 0.95), abs=1e-6)
    assert torch.equal(top_p_filter(logits, 1.0), logits)


def test_token_logprobs_rejects_zero_temperature() -> None:
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(torch.zeros(1, 1, 3), torch.zeros(1, 1, dtype=torch.long), temperature=0.0)


def test_sft_loss_and_masked_mean_ignore_padding() -> None:
    logp = t([[-1.0, -3.0, -100.0]])
    mask = torch.tensor([[True, True, False]])
    assert sft_loss(logp, mask).item() == pytest.approx(2.0)
    assert masked_mean(logp, torch.zeros_like(mask)).item() == 0.0


# ------------------------------------------------------------------ group filters

# Means of the REWARDS/GROUPS groups above: [0.5, 7.0, 2.0, 1.5]; unbiased stds
# [sqrt(1/3) = 0.577, 0 (singleton), 0 (constant), sqrt(4.5) = 2.121].


def test_group_means_hand_computed() -> None:
    assert group_means(t(REWARDS), torch.tensor(GROUPS)).tolist() == [0.5, 7.0, 2.0, 1.5]


def test_low_mean_groups_drops_the_lowest_share_floor() -> None:
    r, g = t(REWARDS), torch.tensor(GROUPS)
    # G = 4: share 0.3 -> floor(1.2) = 1 group, the lowest mean (group 0, 0.5).
    assert low_mean_groups(r, g, 0.3).tolist() == [True, False, False, False]
    # share 0.5 -> 2 groups: means 0.5 and 1.5.
    assert low_mean_groups(r, g, 0.5).tolist() == [True, False, False, True]
    # share 0.2 -> floor(0.8) = 0: nothing dropped.
    assert not low_mean_groups(r, g, 0.2).any()
    # Samples to leave out: group 0's four samples for share 0.3.
    assert low_mean_groups(r, g, 0.3)[g].tolist() == [True] * 4 + [False] * 5


def test_low_mean_groups_ties_go_to_the_earlier_group() -> None:
    # Three groups with mean 1 and one with mean 0; drop 2 of 4: the mean-0 group and the first
    # of the tied ones.
    r = t([1.0, 1.0, 0.0, 2.0, 1.0, 1.0, 0.0, 0.0])
    g = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert group_means(r, g).tolist() == [1.0, 1.0, 1.0, 0.0]
    assert low_mean_groups(r, g, 0.5).tolist() == [True, False, False, True]


def test_low_std_groups_ranks_by_the_advantage_std() -> None:
    r, g = t(REWARDS), torch.tensor(GROUPS)
    # stds [0.577, 0, 0, 2.121]: share 0.5 drops the two zero-std groups (1 and 2).
    assert low_std_groups(r, g, 0.5).tolist() == [False, True, True, False]
    # share 0.75 -> 3 groups: also group 0 (0.577 < 2.121).
    assert low_std_groups(r, g, 0.75).tolist() == [True, True, True, False]


def test_filters_leave_other_groups_advantages_unchanged() -> None:
    r, g = t(REWARDS), torch.tensor(GROUPS)
    adv, _ = group_advantages(r, g)
    keep = ~low_mean_groups(r, g, 0.5)[g]  # drops groups 0 and 3
    adv_kept, _ = group_advantages(r[keep], dense_group_index(g[keep].tolist()))
    assert adv_kept.tolist() == pytest.approx(adv[keep].tolist(), abs=1e-6)


def test_lowest_share_rejects_bad_shares() -> None:
    with pytest.raises(ValueError, match="share must be in"):
        lowest_share(t([1.0, 2.0]), 1.0)
    with pytest.raises(ValueError, match="share must be in"):
        lowest_share(t([1.0]), -0.1)
    assert lowest_share(t([]), 0.3).tolist() == []


def _samples(rewards: list[float], groups: list[int]) -> list:
    from mas_trainer.samples import TrainSample

    return [
        TrainSample([1], [2], [0.0], reward=r, group=("root", g, "agent"))
        for r, g in zip(rewards, groups, strict=True)
    ]


def test_advantages_drop_the_paper_share_of_lowest_mean_groups() -> None:
    # REWARDS/GROUPS: means [0.5, 7, 2, 1.5]; drop_low_mean 0.3 of 4 groups -> 1: group 0.
    samples = _samples(REWARDS, GROUPS)
    kept, m = advantages(samples, drop_low_mean=0.3)
    assert [s.group[1] for s in kept] == [1, 2, 2, 3, 3]
    assert m["algo/groups_dropped_low_mean"] == 1.0 and m["algo/groups_dropped"] == 1.0
    assert m["algo/samples_trained"] == 5.0
    # The kept samples carry their group advantage, unchanged by the drop.
    adv, _ = group_advantages(t(REWARDS), torch.tensor(GROUPS))
    assert [s.advantage for s in kept] == pytest.approx(adv.tolist()[4:], abs=1e-6)
    assert m["algo/advantage_abs_mean"] == pytest.approx(adv[4:].abs().mean().item(), abs=1e-6)


def test_advantages_leave_their_input_unchanged() -> None:
    # A pure function (the module's promise): the rollout's samples keep advantage 0 and the same
    # fields; what is trained on are copies.
    samples = _samples(REWARDS, GROUPS)
    before = [dataclasses.asdict(s) for s in samples]
    kept, _ = advantages(samples, drop_low_mean=0.3)
    assert [dataclasses.asdict(s) for s in samples] == before
    assert not {id(s) for s in kept} & {id(s) for s in samples}
    assert any(s.advantage != 0.0 for s in kept)


def test_advantages_filters_are_a_union_over_all_groups() -> None:
    # low std 0.5 -> groups 1 and 2 (std 0); low mean 0.5 -> groups 0 and 3; with zero-variance
    # dropping on as well, the union is every group.
    kept, m = advantages(
        _samples(REWARDS, GROUPS), drop_zero_var=True, drop_low_mean=0.5, drop_low_std=0.5
    )
    assert kept == [] and m["algo/groups_dropped"] == 4.0
    assert (m["algo/groups_dropped_low_mean"], m["algo/groups_dropped_low_std"]) == (2.0, 2.0)
    kept, m = advantages(_samples(REWARDS, GROUPS), drop_zero_var=True)
    assert m["algo/groups_dropped"] == 2.0 and len(kept) == 6  # groups 0 and 3 stay
    kept, m = advantages(_samples(REWARDS, GROUPS))
    assert len(kept) == 9 and m["algo/groups_dropped"] == 0.0


def test_role_token_weights_weigh_every_role_the_same() -> None:
    # A 30-token tool answer and two 3-token planner answers: per role, its tokens sum to 1/2.
    w = role_token_weights(["tool", "planner", "planner"], [30, 3, 3])
    assert w == pytest.approx([1 / 60, 1 / 12, 1 / 12])
    assert 30 * w[0] == pytest.approx(0.5) and 3 * (w[1] + w[2]) == pytest.approx(0.5)
    # One role: the plain token mean.
    assert role_token_weights(["a", "a"], [2, 6]) == pytest.approx([1 / 8, 1 / 8])


def test_weighted_sft_loss_is_the_mean_of_role_token_means() -> None:
    logp = t([[-1.0, -1.0, -1.0, -1.0], [-3.0, 0.0, 0.0, 0.0]])  # tool: 4 tokens, planner: 1
    mask = torch.tensor([[True, True, True, True], [True, False, False, False]])
    w = t(role_token_weights(["tool", "planner"], [4, 1]))
    assert weighted_sft_loss(logp, mask, w).item() == pytest.approx((1.0 + 3.0) / 2)
    # The plain token mean lets the long answer dominate: (4 * 1 + 3) / 5.
    assert sft_loss(logp, mask).item() == pytest.approx(7 / 5)


def test_policy_change_measures_the_update_after_it() -> None:
    old = t([0.0, 0.0, 0.0, 0.0])
    new = torch.log(t([1.0, 1.1, 1.5, 0.5]))  # ratios: two inside [0.8, 1.2], two outside
    m = policy_change(new, old, 0.2, 0.2)
    assert m["algo/clip_frac"] == pytest.approx(0.5)
    k3 = [(r - 1) - math.log(r) for r in (1.0, 1.1, 1.5, 0.5)]
    assert m["algo/approx_kl"] == pytest.approx(sum(k3) / 4, abs=1e-6)
    assert policy_change(old, old, 0.2, 0.2) == {"algo/approx_kl": 0.0, "algo/clip_frac": 0.0}
