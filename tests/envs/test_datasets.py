"""``mas-data``: every publisher layout prepared from its fixture, de-duplication, bad files.

The fixtures (``tests/fixtures/datasets/``, written by its ``build.py``) are small downloads in
each publisher's own schema. One module-scoped folder holds all nine data sets prepared
together, as a user would; the checks below read it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
import shutil
import zlib
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

import pyarrow as pa
import pyarrow.parquet as pq

import mas_envs
from mas_envs.code.judge import Case, Request, run_requests
from mas_envs.code.problems import (
    ProblemFormatError,
    decode_lcb_tests,
    load_problems,
)
from mas_envs.datasets import DATASETS, DatasetError, Options, prepare
from mas_envs.datasets.catalogue import lcb_release_files
from mas_envs.datasets.cli import main as cli
from mas_envs.datasets.dedup import HeldOutIndex, fingerprint, normalize
from mas_envs.math import loaders as math_loaders
from mas_envs.math.loaders import ProblemFileError
from mas_envs.math.verify import answers_equal

FIX = Path(__file__).parents[1] / "fixtures" / "datasets"
APPS_SLICES = {"test": (0, 3), "train": (3, 7), "validation": (7, None)}
ORDER = [
    "polaris",
    "apps",
    "codecontests",
    "dapo",
    "aime-1983-2024",
    "livecodebench",
    "aime24",
    "aime25",
    "olympiadbench",
]


def _prepare_all(out: Path, order: list[str] = ORDER) -> dict[str, dict]:
    done = {}
    for name in order:
        opts = Options(slices=APPS_SLICES) if name == "apps" else Options()
        done[name] = prepare(name, FIX / name, out, opts).manifest
    return {name: json.loads((out / name / "manifest.json").read_text()) for name in done}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data")
    _prepare_all(out)
    return out


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def _manifest(out: Path, name: str) -> dict:
    return json.loads((out / name / "manifest.json").read_text())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------- what is prepared


def test_every_data_set_has_a_fixture_and_the_paper_splits(prepared):
    assert set(DATASETS) == set(ORDER)
    counts = {
        name: {s: e["problems"] for s, e in _manifest(prepared, name)["splits"].items()}
        for name in ORDER
    }
    assert counts == {
        # APPS rows 0-2 as test (row 2 has no tests), 3-6 train (3 and 4 copy test problems),
        # 7 validation.
        "apps": {"test": 2, "train": 2, "validation": 1},
        "codecontests": {"train": 2, "validation": 1, "test": 2},
        "livecodebench": {"test": 2},  # release v6: test6.jsonl only
        "polaris": {"train": 3},
        "dapo": {"train": 2},
        "aime-1983-2024": {"train": 3},
        "aime24": {"test": 3},
        "aime25": {"test": 3},
        "olympiadbench": {"test": 3},  # OE_TO_maths_en_COMP only
    }
    assert _ids(prepared / "apps" / "test.jsonl") == ["apps/0", "apps/1"]
    # (problem 7 is row 6 of the file, problem 6 row 7)
    assert _ids(prepared / "apps" / "train.jsonl") == ["apps/5", "apps/7"]
    assert _ids(prepared / "apps" / "validation.jsonl") == ["apps/6"]
    assert _ids(prepared / "livecodebench" / "test.jsonl") == [
        "livecodebench/abc390_b",
        "livecodebench/3789",
    ]
    assert _ids(prepared / "aime25" / "test.jsonl") == [
        "aime25/aime2025-I/1",
        "aime25/aime2025-I/2",
        "aime25/aime2025-II/1",
    ]


def test_copies_of_held_out_problems_are_removed_and_reported(prepared):
    matches = {
        (name, m["id"]): (m["copies"], m["method"])
        for name in ORDER
        for split in _manifest(prepared, name)["dedup"].values()
        for m in split["matches"]
    }
    assert matches == {
        # exact: the same text up to spacing, markup and punctuation
        ("apps", "apps/3"): ("apps/test:apps/0", "exact"),
        ("codecontests", "codecontests/1001_A. Sum"): ("apps/test:apps/0", "exact"),
        ("polaris", "polaris/3"): ("aime24/test:aime24/2024-I-2", "exact"),
        ("aime-1983-2024", "aime-1983-2024/2024-II-1"): ("aime24/test:aime24/2024-II-1", "exact"),
        ("dapo", "dapo/9a9b0002-0000-4000-8000-000000000000"): (
            "aime25/test:aime25/aime2025-I/1",
            "exact",
        ),
        # near: a reworded sentence (APPS formatting of a CodeContests test problem), a sentence
        # added at the end of an AIME 2025 problem
        ("apps", "apps/4"): ("codecontests/test:codecontests/1_A. Maximum", "near"),
        ("polaris", "polaris/4"): ("aime25/test:aime25/aime2025-II/1", "near"),
    }
    # The problem that only shares input boilerplate with a test problem stays.
    assert "apps/7" in _ids(prepared / "apps" / "train.jsonl")
    # No training or validation statement normalises to a held-out one.
    for family in ("code", "math"):
        field = "statement" if family == "code" else "question"
        sets = [n for n in ORDER if DATASETS[n].family == family]
        held = {
            fingerprint(json.loads(line)[field])
            for n in sets
            if (prepared / n / "test.jsonl").exists()
            for line in (prepared / n / "test.jsonl").read_text().splitlines()
        }
        for n in sets:
            for split in ("train", "validation"):
                path = prepared / n / f"{split}.jsonl"
                if path.exists():
                    for line in path.read_text().splitlines():
                        assert fingerprint(json.loads(line)[field]) not in held


def test_records_without_tests_are_listed_as_left_out(prepared):
    left = _manifest(prepared, "apps")["left_out"]  # docs/data.md promises it (issue 31)
    assert left["records_without_tests"] == 1
    [example] = left["records_without_tests_examples"]
    assert example.endswith("test.jsonl: record 2")


def test_repeats_inside_a_training_set_are_kept_once(prepared):
    dapo = _manifest(prepared, "dapo")["left_out"]
    assert dapo["train_duplicates"] == 6  # 3 problems x 3 copies in the release
    assert _manifest(prepared, "polaris")["left_out"]["train_duplicates"] == 1
    questions = [
        json.loads(line)["question"]
        for line in (prepared / "dapo" / "train.jsonl").read_text().splitlines()
    ]
    # DAPO's answer-format wrapper is gone: the envs ask for \boxed{}.
    assert questions[1] == "How many positive divisors does $6^{4}$ have?"
    assert not any("Answer:" in q or "step by step" in q for q in questions)


def test_manifest_hashes_inputs_and_outputs_and_names_versions(prepared):
    m = _manifest(prepared, "codecontests")
    assert m["format"] == "mas-rl/data-manifest-v1"
    assert m["published"][0]["hub"] == "deepmind/code_contests"
    inputs = {i["path"]: i["sha256"] for i in m["inputs"]}
    assert inputs == {
        str(p.relative_to(FIX / "codecontests")): _sha(p)
        for p in (FIX / "codecontests" / "data").glob("*.parquet")
    }
    for entry in m["splits"].values():
        path = prepared / "codecontests" / entry["file"]
        assert entry["sha256"] == _sha(path)
        assert entry["problems"] == len(path.read_text().splitlines())
    assert m["versions"]["mas-rl"] and m["versions"]["pyarrow"] == pa.__version__
    assert set(m["dedup"]["train"]["checked_against"]) == {
        "apps/test",
        "apps/validation",
        "codecontests/test",
        "codecontests/validation",
        "livecodebench/test",
    }


def test_test_files_are_the_benchmark_as_published(prepared):
    """De-duplication never touches a test split; its hash is the one written at prepare time."""
    for name in ORDER:
        m = _manifest(prepared, name)
        if "test" in m["splits"]:
            assert "test" not in m["dedup"]
            assert m["splits"]["test"]["sha256"] == _sha(prepared / name / "test.jsonl")


def test_order_of_preparation_does_not_matter(prepared, tmp_path):
    _prepare_all(tmp_path, list(reversed(ORDER)))
    for name in ORDER:
        for split in ("train", "validation", "test"):
            a, b = prepared / name / f"{split}.jsonl", tmp_path / name / f"{split}.jsonl"
            assert a.exists() == b.exists()
            if a.exists():
                assert _ids(a) == _ids(b), (name, split)


def test_preparing_again_is_idempotent(prepared, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(prepared, out)
    before = {p: _sha(p) for p in out.rglob("*.jsonl")}
    prepare("aime24", FIX / "aime24", out)
    prepare("apps", FIX / "apps", out, Options(slices=APPS_SLICES))
    assert {p: _sha(p) for p in out.rglob("*.jsonl")} == before
    # Other slices: the split that is no longer produced is removed, not left stale.
    prepare("apps", FIX / "apps", out, Options(slices={"test": (0, 3), "train": (3, 8)}))
    assert not (out / "apps" / "validation.jsonl").exists()
    assert set(_manifest(out, "apps")["splits"]) == {"test", "train"}


# ------------------------------------------------------------------------- per layout


def test_apps_json_strings_call_problems_and_lists_of_lines(prepared):
    test = {p.id: p for p in load_problems(prepared / "apps" / "test.jsonl")}
    add, flatten = test["apps/0"], test["apps/1"]
    assert add.split == "test" and add.difficulty == "easy" and len(add.tests) == 3
    assert add.public == (Case("stdio", "1 2\n", "3\n"),)
    assert flatten.kind == "function" and flatten.fn_name == "flatten"
    assert flatten.tests[0] == Case("call", "([[1, 2], [3]],)", "[1, 2, 3]")
    squares = load_problems(prepared / "apps" / "train.jsonl")[0]
    assert squares.tests[0] == Case("stdio", "3", "1\n4\n9")  # lists of lines joined
    _references_pass([add, flatten, squares])
    # The default slices are the paper's: every row of a 8-row file is in test[:500].
    assert lcb_release_files("v6") == ["test6.jsonl"]


def test_apps_default_slices_are_the_papers(tmp_path):
    prepare("apps", FIX / "apps", tmp_path)
    assert set(_manifest(tmp_path, "apps")["splits"]) == {"test"}
    assert len(_ids(tmp_path / "apps" / "test.jsonl")) == 7  # row 2 has no tests


def test_codecontests_structs_shards_and_test_cap(prepared):
    train = {p.id: p for p in load_problems(prepared / "codecontests" / "train.jsonl")}
    double = train["codecontests/1000_A. Double"]
    # 1 public + 2 private + 100 generated tests; a training problem keeps 64, public first.
    assert len(double.tests) == 64 and double.tests[0] == Case("stdio", "4\n", "8\n")
    assert double.tests[1:3] == (Case("stdio", "0\n", "0\n"), Case("stdio", "-3\n", "-6\n"))
    assert _manifest(prepared, "codecontests")["left_out"]["tests_beyond_max_tests"] == 39
    assert double.reference == "print(2 * int(input()))\n"  # the first PYTHON3 solution
    assert double.wrong == ("print(int(input()) + 2)\n",)
    assert train["codecontests/1002_B. Words"].reference == ""  # Python 2 only
    test = load_problems(prepared / "codecontests" / "test.jsonl")
    assert [p.split for p in test] == ["test", "test"] and len(test[0].tests) == 3
    valid = load_problems(prepared / "codecontests" / "validation.jsonl")
    assert valid[0].id == "codecontests/1003_A. Reverse" and valid[0].split == "validation"
    _references_pass([double, *test, *valid])


def test_codecontests_max_tests_zero_keeps_every_test(tmp_path):
    prepare("codecontests", FIX / "codecontests", tmp_path, Options(max_tests=0))
    double = load_problems(tmp_path / "codecontests" / "train.jsonl")[0]
    assert len(double.tests) == 103


def test_livecodebench_compressed_private_tests_decode(prepared):
    stdin, call = load_problems(prepared / "livecodebench" / "test.jsonl")
    assert stdin.kind == "stdio" and len(stdin.tests) == 4 and len(stdin.public) == 1
    assert call.kind == "function" and call.fn_name == "maxSum"
    assert call.tests[1:] == (
        Case("call", "([1, 1, 0, 1, 1],)", "1"),
        Case("call", "([-1, -2],)", "-1"),
        Case("call", "([2, -1, 2],)", "2"),
    )
    solution = (
        "class Solution:\n    def maxSum(self, nums):\n        s = {x for x in nums if x > 0}\n"
        "        return sum(s) if s else max(nums)\n"
    )
    geometric = (
        "input()\na = list(map(int, input().split()))\n"
        "print('Yes' if all(a[i] * a[0] == a[1] * a[i - 1] for i in range(1, len(a))) "
        "else 'No')\n"
    )
    results = run_requests(
        [Request(solution, call.tests, call.fn_name), Request(geometric, stdin.tests)]
    )
    assert all(r.passed for res in results for r in res)


@pytest.mark.parametrize(
    ("release", "ids"),
    [
        ("v6", ["abc390_b", "3789"]),
        ("v5", ["abc380_a"]),
        ("v5_v6", ["abc380_a", "abc390_b", "3789"]),
    ],
)
def test_livecodebench_release_tags(tmp_path, release, ids):
    prepare("livecodebench", FIX / "livecodebench", tmp_path, Options(release=release))
    assert _ids(tmp_path / "livecodebench" / "test.jsonl") == [f"livecodebench/{i}" for i in ids]


def test_livecodebench_release_needs_all_its_files(tmp_path):
    with pytest.raises(DatasetError, match=r"release_v6.*missing \['test.jsonl', 'test2.jsonl"):
        prepare("livecodebench", FIX / "livecodebench", tmp_path, Options(release="release_v6"))
    with pytest.raises(DatasetError, match="expected release_v1"):
        lcb_release_files("v7")


def test_math_answers_keep_their_latex(prepared):
    ob = {p.id: p for p in math_loaders.load_problems(prepared / "olympiadbench" / "test.jsonl")}
    assert ob["olympiadbench/2231"].answer == "\\frac{1}{2}"
    assert ob["olympiadbench/2232"].answer == "-2, 2"  # a multiple answer list, joined
    assert ob["olympiadbench/2233"].answer == "(-\\infty, 3]"
    assert answers_equal(ob["olympiadbench/2232"].answer, "2, -2")
    polaris = {p.id: p for p in math_loaders.load_problems(prepared / "polaris" / "train.jsonl")}
    assert polaris["polaris/1"].answer == "\\frac{\\sqrt{3}}{2}"
    assert answers_equal(polaris["polaris/1"].answer, "0.8660254037844386")
    assert polaris["polaris/2"].answer == "(2,3)" and polaris["polaris/1"].source == "polaris"


def test_aime24_layouts_agree(tmp_path):
    """Maxwell-Jia/AIME_2024 (ID, Problem, Answer int) and HuggingFaceH4/aime_2024."""
    a = prepare("aime24", FIX / "aime24", tmp_path / "a").manifest
    b = prepare("aime24", FIX / "aime24-h4", tmp_path / "b").manifest
    assert a["splits"]["test"]["problems"] == b["splits"]["test"]["problems"] == 3
    pa_ = math_loaders.load_problems(tmp_path / "a" / "aime24" / "test.jsonl")
    pb = math_loaders.load_problems(tmp_path / "b" / "aime24" / "test.jsonl")
    assert [p.question for p in pa_] == [p.question for p in pb]
    assert pa_[0].id == "aime24/2024-I-2" and pb[0].id == "aime24/60"
    assert all(answers_equal(x.answer, y.answer) for x, y in zip(pa_, pb, strict=True))
    assert (pa_[0].answer, pb[0].answer) == ("25", "025")


def test_aime25_layouts_agree(tmp_path):
    """opencompass/AIME2025 (two jsonl files, question/answer) and yentinglin/aime_2025 (one
    parquet file, id/problem/answer)."""
    a = prepare("aime25", FIX / "aime25", tmp_path / "a").manifest
    b = prepare("aime25", FIX / "aime25-yentinglin", tmp_path / "b").manifest
    assert a["splits"]["test"]["problems"] == b["splits"]["test"]["problems"] == 3
    pa_ = math_loaders.load_problems(tmp_path / "a" / "aime25" / "test.jsonl")
    pb = math_loaders.load_problems(tmp_path / "b" / "aime25" / "test.jsonl")
    assert [p.question for p in pa_] == [p.question for p in pb]
    assert [p.answer for p in pa_] == [p.answer for p in pb] == ["70", "588", "49"]
    assert pb[0].id.startswith("aime25/")


def test_olympiadbench_configuration(tmp_path):
    prepare(
        "olympiadbench", FIX / "olympiadbench", tmp_path, Options(config="OE_TO_physics_en_COMP")
    )
    [p] = math_loaders.load_problems(tmp_path / "olympiadbench" / "test.jsonl")
    assert p.answer == "19.6" and p.topic == "Mechanics"
    with pytest.raises(DatasetError, match="no OlympiadBench configuration 'OE_MM"):
        prepare("olympiadbench", FIX / "olympiadbench", tmp_path, Options(config="OE_MM"))


# ------------------------------------------------------------------------- through the envs


def test_prepared_files_train_and_test_through_the_code_env(prepared):
    env = mas_envs.make(
        "mas/Code-v0",
        problems={
            "train": [prepared / "apps" / "train.jsonl", prepared / "codecontests" / "train.jsonl"],
            "test": prepared / "livecodebench" / "test.jsonl",
        },
    )
    assert len(env.task_ids("train")) == 4 and len(env.task_ids("test")) == 2
    env.reset(options={"problem_id": "codecontests/1000_A. Double"})
    env.step("```python\nprint(2 * int(input()))\n```")
    assert env.success and env.infos["coder"]["hidden_total"] == 64
    # A prepared file by itself: its records' own split.
    alone = mas_envs.make("mas/Code-v0", problems=prepared / "apps" / "test.jsonl", split="test")
    assert list(alone.task_ids("test")) == ["apps/0", "apps/1"] and not alone.task_ids("train")


def test_prepared_files_train_and_test_through_the_math_env(prepared):
    env = mas_envs.make(
        "mas/Math-v0",
        problems={
            "train": [prepared / "polaris" / "train.jsonl", prepared / "dapo" / "train.jsonl"],
            "test": prepared / "olympiadbench" / "test.jsonl",
        },
        split="test",
        mode="single",
    )
    assert len(env.task_ids("train")) == 5
    env.reset(options={"problem_id": "olympiadbench/2233"})
    env.step("So $x \\le 3$: \\boxed{(-\\infty,3]}")
    assert env.success
    # A prepared file by itself: its records' own split, not a hash of the id.
    alone = mas_envs.make("mas/Math-v0", problems=prepared / "polaris" / "train.jsonl")
    assert len(alone.task_ids("train")) == 3 and not alone.task_ids("test")
    # A prepared data set's folder: its split files.
    folder = mas_envs.make("mas/Math-v1", problems=prepared / "aime24", split="test")
    assert list(folder.task_ids("test")) == [
        "aime24/2024-I-2",
        "aime24/2024-II-4",
        "aime24/2024-II-1",
    ]


def test_prepared_round_trip_equals_the_publisher_file(prepared):
    raw = load_problems(FIX / "livecodebench" / "test6.jsonl")
    done = load_problems(prepared / "livecodebench" / "test.jsonl")
    for a, b in zip(raw, done, strict=True):
        assert b.id == a.id and b.split == "test"
        assert (a.statement, a.kind, a.tests, a.public, a.fn_name, a.starter) == (
            b.statement,
            b.kind,
            b.tests,
            b.public,
            b.fn_name,
            b.starter,
        )


# ------------------------------------------------------------------------- bad downloads


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / "raw" / name
    shutil.copytree(FIX / name, dst)
    return dst


def _hub_metadata(raw: Path, rel: str, etag: str) -> None:
    """What ``huggingface-cli download --local-dir`` leaves beside a downloaded file."""
    meta = raw / ".cache" / "huggingface" / "download" / f"{rel}.metadata"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(f"{'c0ffee' * 6}abcd\n{etag}\n1712656091.123\n")


def test_hub_download_metadata_gives_the_revision_and_catches_cut_off_files(tmp_path):
    raw = _copy("codecontests", tmp_path)
    shards = sorted((raw / "data").glob("*.parquet"))
    for shard in shards:  # LFS files: the ETag is the SHA-256
        _hub_metadata(raw, f"data/{shard.name}", _sha(shard))
    m = prepare("codecontests", raw, tmp_path / "out").manifest
    assert {i["revision"] for i in m["inputs"]} == {"c0ffee" * 6 + "abcd"}
    raw = _copy("apps", tmp_path / "b")
    blob = (raw / "test.jsonl").read_bytes()  # a regular file: the ETag is the git blob hash
    _hub_metadata(raw, "test.jsonl", hashlib.sha1(b"blob %d\0" % len(blob) + blob).hexdigest())
    assert prepare("apps", raw, tmp_path / "out").manifest["inputs"][0]["revision"]
    shard = shards[0]
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(DatasetError, match=rf"{shard.name}: its bytes do not match"):
        prepare("codecontests", tmp_path / "raw" / "codecontests", tmp_path / "out")


def test_missing_column_names_the_file_and_the_column(tmp_path):
    raw = _copy("codecontests", tmp_path)
    shard = next((raw / "data").glob("test-*.parquet"))
    table = pq.read_table(shard)
    pq.write_table(table.drop(["private_tests"]), shard)
    with pytest.raises(DatasetError, match=rf"{shard.name}: no column 'private_tests'"):
        prepare("codecontests", raw, tmp_path / "out")


def test_cut_off_parquet_is_named(tmp_path):
    raw = _copy("dapo", tmp_path)
    path = raw / "data" / "dapo-math-17k.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DatasetError, match=r"dapo-math-17k\.parquet: not a readable parquet"):
        prepare("dapo", raw, tmp_path / "out")


def test_malformed_row_stops_with_file_and_line_or_is_skipped_and_listed(tmp_path):
    raw = _copy("apps", tmp_path)
    lines = (raw / "test.jsonl").read_text().splitlines()
    lines.insert(1, '{"problem_id": 99, "question": "cut off')
    (raw / "test.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        ProblemFormatError, match=r"test.jsonl: record 1 \(line 2\): not valid JSON"
    ):
        prepare("apps", raw, tmp_path / "out")
    m = prepare("apps", raw, tmp_path / "out", Options(skip_bad_rows=True)).manifest
    assert m["left_out"]["malformed_rows"] == 1
    assert "record 1 (line 2)" in m["left_out"]["malformed_examples"][0]
    assert m["splits"]["test"]["problems"] == 7


def test_bad_field_inside_a_row_is_named(tmp_path):
    raw = _copy("apps", tmp_path)
    rows = [json.loads(line) for line in (raw / "test.jsonl").read_text().splitlines()]
    rows[5]["input_output"] = '{"inputs": ["1"], "outputs": '
    (raw / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        ProblemFormatError, match=r"record 5 \(line 6\): field 'input_output': not valid JSON"
    ):
        prepare("apps", raw, tmp_path / "out")
    raw = _copy("polaris", tmp_path)
    path = raw / "polaris-data-53K.jsonl"
    path.write_text(path.read_text() + json.dumps({"problem": "What is 1+1?", "answer": ""}) + "\n")
    with pytest.raises(ProblemFileError, match=r"record 7: field 'answer' is empty"):
        prepare("polaris", raw, tmp_path / "out")


def _lcb_with_private(tmp_path: Path, blob: str) -> Path:
    raw = _copy("livecodebench", tmp_path)
    rows = [json.loads(line) for line in (raw / "test6.jsonl").read_text().splitlines()]
    rows[1]["private_test_cases"] = blob
    (raw / "test6.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return raw


class _Hostile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_livecodebench_blob_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    blob = base64.b64encode(zlib.compress(pickle.dumps(_Hostile(marker)))).decode()
    raw = _lcb_with_private(tmp_path, blob)
    with pytest.raises(
        ProblemFormatError,
        match=r"test6.jsonl: record 1 \(line 2\): field 'private_test_cases'.*refusing to load "
        r"the global (posix|os)\.system",
    ):
        prepare("livecodebench", raw, tmp_path / "out")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        ("@@not base64@@", "not base64"),
        (base64.b64encode(b"plain bytes").decode(), "not zlib data"),
        (base64.b64encode(zlib.compress(b"not a pickle")).decode(), "not a plain-value pickle"),
        (
            base64.b64encode(zlib.compress(pickle.dumps([{"input": "1"}]))).decode(),
            "holds a list, not the tests' JSON text",
        ),
        (
            base64.b64encode(zlib.compress(pickle.dumps("[{broken"))).decode(),
            "the unpickled text is not JSON",
        ),
    ],
)
def test_undecodable_livecodebench_blob_names_the_row(tmp_path, blob, match):
    raw = _lcb_with_private(tmp_path, blob)
    with pytest.raises(ProblemFormatError, match=rf"record 1 \(line 2\): .*{match}"):
        prepare("livecodebench", raw, tmp_path / "out")


def test_livecodebench_decompression_is_bounded():
    bomb = base64.b64encode(zlib.compress(pickle.dumps("[" + " " * 100_000 + "]"))).decode()
    assert decode_lcb_tests(bomb) == []
    with pytest.raises(ValueError, match="more than 1000 bytes"):
        decode_lcb_tests(bomb, max_bytes=1000)


def test_wrong_download_and_wrong_names(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match="huggingface-cli download deepmind/code_contests"):
        prepare("codecontests", empty, tmp_path / "out")
    with pytest.raises(DatasetError, match="did you mean 'codecontests'"):
        prepare("code_contests", empty, tmp_path / "out")
    with pytest.raises(DatasetError, match="release do\\(es\\) not apply to apps"):
        prepare("apps", FIX / "apps", tmp_path / "out", Options(release="v5"))
    with pytest.raises(FileNotFoundError, match="no such file"):
        prepare("apps", tmp_path / "nowhere", tmp_path / "out")
    with pytest.raises(DatasetError, match=r"aime2025-I\.jsonl: no column 'ID'"):
        prepare("aime-1983-2024", FIX / "aime25" / "aime2025-I.jsonl", tmp_path / "out")


def test_csv_row_with_extra_cells(tmp_path):
    raw = _copy("aime-1983-2024", tmp_path)
    path = raw / "AIME_Dataset_1983_2024.csv"
    path.write_text(path.read_text() + "1990-1,1990,1,What is 2+2?,4,,oops\n")
    with pytest.raises(ProblemFileError, match="record 5: 7 cells for 6 header columns"):
        prepare("aime-1983-2024", raw, tmp_path / "out")


# ------------------------------------------------------------------------- the command line


def test_cli_list_names_every_data_set_and_where_it_is_published(capsys, prepared):
    assert cli(["list", "--out", str(prepared)]) == 0
    out = capsys.readouterr().out
    for spec in DATASETS.values():
        assert f"mas-data prepare {spec.name} --from raw/{spec.name} --out data" in out
        assert spec.published[0].url in out
    assert "train 2, validation 1, test 2" in out  # codecontests as prepared


def test_cli_prepare_reports_and_fails_clearly(capsys, tmp_path):
    out = tmp_path / "data"
    assert cli(["prepare", "aime24", "--from", str(FIX / "aime24"), "--out", str(out)]) == 0
    assert (
        cli(["prepare", "aime-1983-2024", "--from", str(FIX / "aime-1983-2024"), "--out", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "aime-1983-2024/train: removed 1 copies of held-out problems" in text
    assert f"{out / 'aime24' / 'test.jsonl'}: 3 problems" in text
    with pytest.raises(SystemExit) as exc:
        cli(["prepare", "apps", "--from", str(FIX / "apps"), "--out", str(out), "--slice", "t=0"])
    assert exc.value.code == 2
    assert "expected SPLIT=START:END" in capsys.readouterr().err
    assert cli(["prepare", "apps", "--from", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert "no such file or folder" in capsys.readouterr().err


# ------------------------------------------------------------------------- matching


def test_normalize_ignores_markup_spacing_and_case():
    assert normalize("$\\left( x \\right)$ and  \\dfrac{1}{2}") == normalize("(X) and \\frac{1}{2}")
    assert normalize("-----Input-----\nn, m") == "input n m"
    assert normalize("x^2 = 4") != normalize("x^3 = 4")


def test_held_out_index_exact_near_and_boilerplate():
    long = " ".join(f"w{i}" for i in range(40))
    index = HeldOutIndex([("t/test:a", long), ("t/test:b", "short text")], threshold=0.5)
    assert index.find("SHORT  text!").method == "exact"
    near = index.find(long.replace("w39", "changed"))
    assert near is not None and near.method == "near" and near.score >= 0.9
    # 3 of the 9 8-grams of a 16-word text are in `long`: 0.33 < 0.5.
    assert index.find(" ".join(f"w{i}" for i in range(10)) + " a b c d e f") is None
    assert HeldOutIndex([("k", long)], threshold=0).find(long + " more") is None
    # An 8-gram in more than `common` held-out problems is boilerplate and not evidence.
    boiler = "the first line contains a single integer t the number of test cases"
    held = [
        (f"k{i}", f"{boiler} story {i} " + " ".join(f"x{i}y{j}" for j in range(5)))
        for i in range(3)
    ]
    assert HeldOutIndex(held, common=2).find(f"{boiler} something else entirely") is None
    assert HeldOutIndex(held, common=5).find(f"{boiler} something else entirely") is not None


def _references_pass(problems) -> None:
    reqs = [Request(p.reference, p.tests, p.fn_name, p.setup) for p in problems]
    wrong = [Request(w, p.tests, p.fn_name, p.setup) for p in problems for w in p.wrong]
    results = run_requests(reqs + wrong)
    assert all(all(r.passed for r in res) for res in results[: len(reqs)])
    assert all(not all(r.passed for r in res) for res in results[len(reqs) :])


def test_mas_data_imports_neither_torch_nor_pyarrow():
    import subprocess
    import sys

    code = (
        "import sys, mas_envs.datasets, mas_envs.datasets.cli; "
        "print(sorted(m for m in ('torch', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_newer_prepared_layout_is_refused_with_what_to_do(prepared, tmp_path):
    for name, family_error in (("aime24", ProblemFileError), ("livecodebench", ProblemFormatError)):
        line = (prepared / name / "test.jsonl").read_text().splitlines()[0]
        rec = json.loads(line)
        rec["layout"] = rec["layout"].replace("-v1", "-v9")
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(rec) + "\n")
        loader = math_loaders.load_problems if name == "aime24" else load_problems
        with pytest.raises(family_error, match="is not a layout this version reads"):
            loader(path)


def test_validation_held_out_from_a_training_only_set(prepared, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(prepared, out)
    m = prepare("polaris", FIX / "polaris", out, Options(validation=1)).manifest
    assert {s: e["problems"] for s, e in m["splits"].items()} == {"train": 2, "validation": 1}
    [held] = math_loaders.load_problems(out / "polaris" / "validation.jsonl")
    assert held.split == "validation"
    train = _ids(out / "polaris" / "train.jsonl")
    assert held.id not in train and len(train) == 2
    # The same problem every time: a stable hash of the id.
    again = prepare("polaris", FIX / "polaris", tmp_path / "again", Options(validation=1))
    assert _ids(tmp_path / "again" / "polaris" / "validation.jsonl") == [held.id]
    assert again.manifest["splits"]["validation"]["problems"] == 1
    with pytest.raises(DatasetError, match="has a validation split of its own"):
        prepare("codecontests", FIX / "codecontests", tmp_path / "x", Options(validation=1))
    with pytest.raises(DatasetError, match="has only 4 training problems"):
        prepare("aime-1983-2024", FIX / "aime-1983-2024", tmp_path / "x", Options(validation=5))


def test_an_aime_answer_naming_two_accepted_answers_grades_each_right(prepared, tmp_path):
    """AIME 1983-2024 keeps 2022 II problem 8's answer as ``080 or 081 (both were accepted)``:
    80 and 81 are both right, from the publisher's file and from the prepared one; 82 is not."""
    raw = {p.id: p for p in math_loaders.load_problems(FIX / "aime-1983-2024", "aime")}
    path = prepared / "aime-1983-2024" / "train.jsonl"
    problems = {p.id: p for p in math_loaders.load_problems(path)}
    p = problems["aime-1983-2024/2022-II-8"]
    assert (p.answer, p.also_accepted) == ("080", ("081",))
    assert raw["aime/aime-1983-2024/2022-II-8"].accepted == ("080", "081")
    assert problems["aime-1983-2024/1983-1"].also_accepted == ()
    env = mas_envs.make("mas/Math-v0", problems={"train": path}, split="train")
    for given, right in (("80", True), ("081", True), ("82", False), ("80 or 81", False)):
        env.reset(options={"problem_id": p.id})
        env.step(f"```python\nprint({given!r})\n```")
        assert env.infos["tool"]["correct"] is right, given
        env.step(f"So \\boxed{{{given}}}")
        assert env.infos["reasoner"]["correct"] is right and env.success is right, given
    env.reset(options={"problem_id": p.id})
    rng = __import__("numpy").random.default_rng(0)
    for _ in range(50):  # a random (wrong) answer is neither 80 nor 81
        assert not env._right(env.random_action(rng, "reasoner").split("{")[-1].rstrip("}"))
    bad = tmp_path / "bad.jsonl"
    rec = {**math_loaders.problem_to_record(p), "also_accepted": "081"}
    bad.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ProblemFileError, match="field 'also_accepted': expected a list"):
        math_loaders.load_problems(bad)
