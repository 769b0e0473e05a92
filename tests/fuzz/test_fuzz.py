"""The fuzz suite: mutated checkpoints of every source format end in success or a clean refusal.

The campaign test runs a fixed seed and a few hundred cases per format (`--fuzz-iterations N`
or LAZYPARAMS_FUZZ_ITERATIONS runs more; benchmarks/fuzz_long.py runs for minutes). The other
tests check the parts: seeds are valid, cases are reproducible, every mutation applies, and the
worker pool reports hangs, crashes, memory blow-ups and foreign exceptions.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from lazyparams.errors import CheckpointError, LazyParamsError
from tests.fuzz.campaign import GOOD, Finding, Report, run_campaign, write_reproducer
from tests.fuzz.cases import MENUS, Case, make_case
from tests.fuzz.pool import Pool
from tests.fuzz.seeds import FORMATS, build_seeds
from tests.fuzz.worker import exercise, outcome_of

CI_SEED = 14
CI_CASES_PER_FORMAT = 150


@pytest.fixture(scope="module", name="seeds")
def seeds_fixture() -> list:
    return build_seeds()


def _option(config: pytest.Config, name: str, default: int) -> int:
    value = config.getoption(f"--fuzz-{name}")
    if value is None:
        value = int(os.environ.get(f"LAZYPARAMS_FUZZ_{name.upper()}", default))
    return int(value)


def test_every_source_survives_the_campaign(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    per_format = _option(request.config, "iterations", CI_CASES_PER_FORMAT)
    seed = _option(request.config, "seed", CI_SEED)
    report = run_campaign(per_format, seed=seed, workers=2, findings_dir=tmp_path / "findings")
    print(report.text())
    assert not report.findings, report.text()
    for format in FORMATS:  # the mutations reach both the accepting and the refusing paths
        counts = report.outcomes[format]
        assert sum(counts.values()) == per_format
        assert counts["refused"] > 0, (format, counts)
        assert counts["ok"] > 0 or per_format < 50, (format, counts)


def test_seeds_are_valid_checkpoints_of_every_format(seeds: list, tmp_path: Path) -> None:
    assert {seed.format for seed in seeds} == set(FORMATS)
    for i, seed in enumerate(seeds):
        output = "gguf" if "gguf" in seed.format else "safetensors"
        case = {"files": seed.files, "entry": seed.entry, "convert_to": output}
        (tmp_path / str(i)).mkdir()
        if seed.name.startswith("legacy"):  # read, or refused by name where unsupported
            try:
                exercise(case, tmp_path / str(i))
            except CheckpointError as err:
                assert "legacy" in str(err)
            continue
        assert exercise(case, tmp_path / str(i))["tensors_bytes"] > 0, seed.name


def test_a_case_is_made_again_from_its_number(seeds: list) -> None:
    first = [make_case(seeds, 3, i, "torch") for i in range(20)]
    again = [make_case(seeds, 3, i, "torch") for i in range(20)]
    assert first == again
    assert len({tuple(sorted(c.files.items())) for c in first}) > 15
    assert make_case(seeds, 4, 0, "torch") != first[0]


@pytest.mark.parametrize("format", FORMATS)
def test_every_mutation_of_the_menu_changes_the_files(seeds: list, format: str) -> None:
    mine = [s for s in seeds if s.format == format]
    for _, mutation in MENUS[format]:
        changed = 0
        for draw in range(12):
            seed = mine[draw % len(mine)]
            tree, detail = mutation(random.Random(draw), dict(seed.files), mine)
            assert isinstance(detail, str) and detail
            assert all(isinstance(v, bytes) for v in tree.values())
            changed += tree != seed.files
        assert changed >= 6, (format, mutation, changed)


def _probe(action: str) -> tuple[str, dict]:
    return action, {"action": f"tests.fuzz.probes:{action}", "case": {"entry": "m.bin"}}


def test_the_pool_reports_every_way_a_case_can_end() -> None:
    actions = ["succeed", "hang", "refuse", "foreign_error", "allocate", "grow", "die", "succeed"]
    with Pool(2, timeout=1.5, memory=1 << 30) as pool:
        answered = [(job[0], reply) for job, reply in pool.run(map(_probe, actions))]
        assert pool.restarts == 3  # after the hang, the growth and the crash
    assert sorted(label for label, _ in answered) == sorted(actions)  # all answered
    replies = dict(answered)
    assert replies["succeed"] == replies["succeed"] | {"outcome": "ok", "entry": "m.bin"}
    assert replies["hang"]["outcome"] == "hang"
    assert "probes.py" in replies["hang"]["traceback"]  # where it hung, from faulthandler
    assert replies["refuse"]["outcome"] == "refused"
    error = replies["foreign_error"]
    assert (error["outcome"], error["type"], error["frame"]) == (
        "error",
        "KeyError",
        "probes.py:foreign_error",
    )
    assert replies["allocate"]["outcome"] == "memory"
    assert (replies["grow"]["outcome"], replies["grow"]["type"]) == ("memory", "RSS")
    assert (replies["die"]["outcome"], replies["die"]["type"]) == ("crash", "exit -11")


def test_outcomes_tell_refusals_from_findings() -> None:
    try:
        raise LazyParamsError("bad file")
    except LazyParamsError as err:
        assert outcome_of(err)["outcome"] == "refused"
    try:
        {}["x"]
    except KeyError as err:
        reply = outcome_of(err)
    assert reply["outcome"] not in GOOD and reply["last_line"] == "KeyError: 'x'"


def test_a_refusal_showing_an_object_repr_is_a_finding() -> None:
    try:
        raise CheckpointError(f"m.npz: not a readable header: {object()!r}")
    except CheckpointError as err:
        reply = outcome_of(err)
    assert (reply["outcome"], reply["type"]) == ("internals", "CheckpointError")
    assert reply["last_line"].startswith("the message shows an object's repr")


def test_a_finding_is_kept_with_its_reproducer(tmp_path: Path) -> None:
    case = Case(
        1, 7, "npz", "sink0", ("m.npz: truncate to 9",), {"m.npz": b"PK\x03\x04x"}, "m.npz", None
    )
    finding = Finding(
        "npz", "error", "ValueError", "ValueError: bad", "numpy_source.py:load", case, "tb"
    )
    folder = write_reproducer(tmp_path, finding, 0)
    assert (folder / "files" / "m.npz").read_bytes() == b"PK\x03\x04x"
    meta = json.loads((folder / "case.json").read_text())
    assert (meta["seed"], meta["index"], meta["mutations"]) == (1, 7, ["m.npz: truncate to 9"])
    report = Report(findings={("npz",): finding}, cases=1)
    assert "[npz] error ValueError at numpy_source.py:load" in report.text()
