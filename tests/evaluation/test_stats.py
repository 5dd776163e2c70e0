"""The statistics of repeated attempts (harness.core.stats, harness.evaluation.attempts) against
published values, hand computations, brute force, and coverage measured by simulation with a fixed seed."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from harness.core import stats
from harness.core.comparison import compare_reports, outcomes
from harness.core.records import AttemptStats, EvalReport
from harness.evaluation.attempts import summarize


@pytest.mark.parametrize(("c", "n", "low", "high"), [
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
    (7, 10, 0.3968, 0.8922)])
def test_wilson_matches_the_published_intervals(c: int, n: int, low: float, high: float) -> None:
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table II, method 3
    interval = stats.wilson(c / n, n)
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)


def _pass_at_k_by_enumeration(n: int, c: int, k: int) -> float:
    """The fraction of the k-subsets of n attempts (c of them passing) that hold a pass."""
    attempts = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(attempts[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_is_the_unbiased_estimator_checked_by_enumeration_and_by_chens_product() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected = _pass_at_k_by_enumeration(n, c, k)
                product = 1.0 if n - c < k else 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
                assert stats.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)
                assert stats.pass_at_k(n, c, k) == pytest.approx(product, abs=1e-12), (n, c, k)
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)          # 1 - C(3,2)/C(5,2), by hand
    assert stats.mean_pass_at_k([(3, 2), (3, 3), (3, 1)], 2) == pytest.approx((1 + 1 + 2 / 3) / 3)
    assert stats.mean_pass_at_k([(3, 2), (1, 1)], 2) is None       # an instance with fewer attempts than k
    with pytest.raises(ValueError, match="needs 0 <= c <= n and 1 <= k <= n; got n=3, c=4, k=1"):
        stats.pass_at_k(3, 4, 1)


def test_pass_at_1_with_one_attempt_each_is_wilsons_interval() -> None:
    got = stats.pass_at_1([(1, 1)] * 7 + [(1, 0)] * 3)
    assert got is not None and got.method == stats.WILSON and got.effective_n == 10
    assert (round(got.interval.low, 4), round(got.interval.high, 4)) == (0.3968, 0.8922)


def test_repeated_identical_attempts_add_no_information_and_disagreeing_ones_do() -> None:
    once = stats.pass_at_1([(1, 1)] * 7 + [(1, 0)] * 3)
    repeated = stats.pass_at_1([(5, 5)] * 7 + [(5, 0)] * 3)        # every instance: the same verdict 5 times
    assert once is not None and repeated is not None and repeated.method == stats.WILSON_CLUSTERED
    assert repeated.effective_n == 10 and repeated.interval == once.interval
    # every instance passes 3 times of 5: the spread between instances is 0, the attempts are all the information
    uniform = stats.pass_at_1([(5, 3)] * 10)
    assert uniform is not None and uniform.effective_n == 50 and uniform.interval == stats.wilson(0.6, 50)
    # all fail: s^2 says nothing; the instances are the sample (m), never a zero-width interval
    none = stats.pass_at_1([(4, 0)] * 10)
    assert none is not None and none.effective_n == 10 and none.interval.high == pytest.approx(0.2775, abs=1e-4)


def test_the_clustered_interval_by_hand() -> None:
    # p = (1, 2/3, 0): mean 5/9, s^2 = ((4/9)^2 + (1/9)^2 + (5/9)^2) / 3 = 42/243, n_eff = (5/9)(4/9) / (42/243 / 3)
    got = stats.pass_at_1([(3, 3), (3, 2), (3, 0)])
    assert got is not None and got.value == pytest.approx(5 / 9)
    n_eff = (5 / 9) * (4 / 9) / ((42 / 243) / 3)
    assert got.effective_n == pytest.approx(n_eff) == pytest.approx(4.285714, abs=1e-6)
    z = 1.959963984540054
    center = (5 / 9 + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * math.sqrt((5 / 9) * (4 / 9) / n_eff + z * z / (4 * n_eff * n_eff))
    assert (got.interval.low, got.interval.high) == (pytest.approx(center - half), pytest.approx(center + half))


def _coverage(m: int, epochs: int, a: float, b: float, trials: int, seed: int) -> tuple[float, float]:
    """How often the interval of an evaluation holds the true pass@1, the instances' pass chances drawn
    from Beta(a, b) (true pass@1 a / (a + b)); and the same for Wilson over every attempt as if
    independent (the mistake clustering avoids)."""
    rng, truth = random.Random(seed), a / (a + b)
    clustered = pooled = 0
    for _ in range(trials):
        counts = []
        for _ in range(m):
            p = rng.betavariate(a, b)
            counts.append((epochs, sum(rng.random() < p for _ in range(epochs))))
        got = stats.pass_at_1(counts)
        assert got is not None
        clustered += got.interval.low <= truth <= got.interval.high
        naive = stats.wilson(sum(c for _, c in counts) / (m * epochs), m * epochs)
        pooled += naive.low <= truth <= naive.high
    return clustered / trials, pooled / trials


def test_the_clustered_interval_covers_95_percent_where_pooling_the_attempts_does_not() -> None:
    for m, epochs, a, b in ((40, 5, 0.5, 0.5), (20, 3, 0.3, 0.7)):
        clustered, pooled = _coverage(m, epochs, a, b, trials=1000, seed=7)
        assert 0.925 <= clustered <= 0.97, (m, epochs, clustered)
        assert pooled < 0.87, (m, epochs, pooled)                   # the test tells the two apart


def _agresti_min(fixed: int, broken: int, n: int) -> tuple[float, float]:
    """Agresti and Min (2005), by their cells: 0.5 added to each of the 2x2 table's four cells."""
    b, c, total = fixed + 0.5, broken + 0.5, n + 2
    d = (b - c) / total
    se = math.sqrt((b + c) - (b - c) ** 2 / total) / total
    return d - 1.959963984540054 * se, d + 1.959963984540054 * se


def test_the_paired_difference_is_agresti_and_mins_interval_for_single_attempts() -> None:
    # 30 instances: 9 fixed in B, 1 broken, 20 unchanged (12 passing in both)
    pairs = [(0.0, 1.0)] * 9 + [(1.0, 0.0)] * 1 + [(1.0, 1.0)] * 12 + [(0.0, 0.0)] * 8
    got = stats.paired_difference(pairs)
    assert got is not None and got.instances == 30 and got.difference == pytest.approx(8 / 30)
    assert (got.mean_a, got.mean_b) == (pytest.approx(13 / 30), pytest.approx(21 / 30))
    low, high = _agresti_min(9, 1, 30)
    assert (low, high) == (pytest.approx(0.25 - 1.959963984540054 * 3 / 32),     # by hand: d' = 8/32,
                           pytest.approx(0.25 + 1.959963984540054 * 3 / 32))     # se = sqrt(11 - 2) / 32
    assert (got.interval.low, got.interval.high) == (pytest.approx(low), pytest.approx(high))
    assert got.verdict == "better" and low > 0
    close = stats.paired_difference([(0.0, 1.0)] * 8 + [(1.0, 0.0)] * 2 + [(1.0, 1.0)] * 12 + [(0.0, 0.0)] * 8)
    assert close is not None and close.verdict == "no significant difference"   # 8 against 2: not enough
    assert close.interval.low == pytest.approx(_agresti_min(8, 2, 30)[0]) and close.interval.low < 0
    same = stats.paired_difference([(1.0, 1.0)] * 5 + [(0.0, 0.0)] * 5)
    assert same is not None and same.verdict == "no significant difference"
    assert same.interval.low < 0 < same.interval.high
    worse = stats.paired_difference([(1.0, 0.0)] * 3)
    assert worse is not None and worse.verdict == "worse"
    assert worse.interval.high == pytest.approx(_agresti_min(0, 3, 3)[1])   # -0.6 + 1.96 * sqrt(0.44 / 5)
    assert stats.paired_difference([]) is None


def _paired_coverage(m: int, epochs: int, gamma: float, trials: int, seed: int) -> float:
    """Instance difficulty u ~ Beta(1, 1); A passes with u, B with u^gamma; true B - A = 1/(1+gamma) - 1/2."""
    rng, truth = random.Random(seed), 1 / (1 + gamma) - 0.5
    covered = 0
    for _ in range(trials):
        pairs = []
        for _ in range(m):
            u = rng.random()
            pairs.append((sum(rng.random() < u for _ in range(epochs)) / epochs,
                          sum(rng.random() < u ** gamma for _ in range(epochs)) / epochs))
        got = stats.paired_difference(pairs)
        assert got is not None
        covered += got.interval.low <= truth <= got.interval.high
    return covered / trials


def test_the_paired_interval_covers_at_least_95_percent_with_few_instances_or_several_epochs() -> None:
    for m, epochs, gamma in ((10, 1, 0.5), (40, 1, 0.7), (15, 3, 0.8)):
        assert _paired_coverage(m, epochs, gamma, trials=1000, seed=11) >= 0.93, (m, epochs, gamma)


def test_an_evaluations_attempts_summarized_by_hand() -> None:
    statuses = {"wordcount": ["resolved", "empty_patch", "resolved"], "pagination": ["resolved"] * 3,
                "cart": ["unresolved", "empty_patch", "resolved"], "broken-env": ["error", "error", None],
                "half": ["resolved", None, "error"]}
    got = summarize(list(statuses), 3, statuses, {"cost_usd": None})
    assert (got.attempts_total, got.attempts_done, got.attempts_resolved) == (15, 13, 7)
    assert got.per_instance["cart"] == {"statuses": ["unresolved", "empty_patch", "resolved"], "passed": 1,
                                        "graded": 3}
    assert got.left_out == {"broken-env": "no graded attempt: 2 error, 1 not finished"}
    assert got.instances_counted == 4
    # p = 2/3, 1, 1/3 and 1/1 (half: one graded attempt): pass@1 is their mean; pass@k up to the fewest (1)
    assert got.pass_at_1 == pytest.approx((2 / 3 + 1 + 1 / 3 + 1) / 4, abs=1e-6)
    assert list(got.pass_at_k) == ["1"] and got.flipped_ids == ["cart", "wordcount"]
    assert got.ci_method == stats.WILSON_CLUSTERED and got.totals == {"cost_usd": None}
    three = summarize(["wordcount", "pagination", "cart"], 3, statuses, {})
    assert three.pass_at_k == {"1": pytest.approx(2 / 3, abs=1e-6), "2": pytest.approx(8 / 9, abs=1e-6), "3": 1.0}


def test_outcomes_read_every_report_shape_and_a_hostile_value_makes_its_instance_not_graded() -> None:
    per = {"a": {"statuses": ["resolved", "unresolved"], "passed": 1, "graded": 2},
           "b": {"passed": True, "graded": 2}, "c": {"passed": 3, "graded": 2}, "d": "torn",
           "e": {"passed": 0, "graded": 0}, "f": {"passed": "1", "graded": 1}}
    report = EvalReport.from_dict({"attempts": {"per_instance": per}}, "report.json", strict=False)
    assert outcomes(report) == {"a": (2, 1)}
    old = EvalReport(instances={"x": {"status": "resolved"}, "y": {"status": "empty_patch"}, "z": {"status": "error"},
                                "w": "torn"})
    assert outcomes(old) == {"x": (1, 1), "y": (1, 0)}
    swebench = EvalReport(resolved_ids=["x"], unresolved_ids=["y", 3], empty_patch_ids=["z"], error_ids=["e"])  # type: ignore[list-item]
    assert outcomes(swebench) == {"x": (1, 1), "y": (1, 0), "z": (1, 0)}
    torn = EvalReport.from_dict({"attempts": "torn", "instances": ["x"]}, "report.json", strict=False)
    assert torn.attempts == AttemptStats() and outcomes(torn) == {}


def test_compare_pairs_by_instance_and_says_what_was_left_out_and_why() -> None:
    a = EvalReport(submitted_ids=["x", "y", "z", "only-a"], instances={
        "x": {"status": "unresolved"}, "y": {"status": "resolved"}, "z": {"status": "error"},
        "only-a": {"status": "resolved"}})
    b = EvalReport(submitted_ids=["x", "y", "z", "only-b"], attempts=AttemptStats(per_instance={
        "x": {"passed": 2, "graded": 3}, "y": {"passed": 3, "graded": 3}, "z": {"passed": 1, "graded": 1},
        "only-b": {"passed": 0, "graded": 3}}))
    got = compare_reports(a, b)
    assert got is not None
    data = got.to_dict()
    assert data["paired_instances"] == 2 and data["left_out"] == {
        "only-a": "only in A", "only-b": "only in B", "z": "no graded attempt in A"}
    assert data["changed"] == [{"instance_id": "x", "a": "0/1", "b": "2/3", "change": "fixed"}]
    assert data["difference"] == pytest.approx(1 / 3, abs=1e-6) and data["verdict"] == "no significant difference"
    assert compare_reports(a, EvalReport(submitted_ids=["q"])) is None
