"""`plan`: what a conversion reads, writes and holds, predicted from the header alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.engine import convert, parse_size, plan
from lazyparams.errors import BudgetError, ConvertError
from lazyparams.io import open_source
from lazyparams.ir import Call, ExternFunc, Function
from tests.engine.helpers import CountingSource, bert_tensors, read_all, small_llama


@pytest.fixture(scope="module", name="llama_path")
def llama_path_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


def test_plan_of_a_path_counts_reads_writes_and_memory(llama_path: Path) -> None:
    the_plan = plan("fuse-qkv+cast:float16", llama_path)
    with open_source(llama_path) as source:
        infos = {name: source.info(name) for name in source.names()}
    assert the_plan.source_tensors == len(infos) == len(the_plan.inputs)
    assert the_plan.bytes_in == sum(info.nbytes for info in infos.values())
    assert the_plan.bytes_out == sum(info.nbytes for info in the_plan.outputs)
    assert the_plan.bytes_out == the_plan.bytes_in // 2  # float16 of everything
    assert 0 < the_plan.predicted_peak_bytes < the_plan.eager_peak_bytes
    assert the_plan.eager_peak_bytes >= the_plan.bytes_in
    assert the_plan.peak_binding in the_plan.module.script()
    assert the_plan.spec == "fuse-qkv+cast:float16"
    assert the_plan.source.endswith("model.safetensors.index.json")
    # without a budget, the default (this machine's usable memory) holds a small model
    assert the_plan.budget_is_default and the_plan.fits and the_plan.budget_message is None


def test_the_prediction_is_what_the_vm_meters(llama_path: Path) -> None:
    out: dict[str, np.ndarray] = {}
    report = convert("fuse-qkv+quantize-int8", llama_path, out, progress=False)
    assert report.measured_peak_bytes == report.predicted_peak_bytes
    assert (
        report.predicted_peak_bytes
        == plan("fuse-qkv+quantize-int8", llama_path).predicted_peak_bytes
    )


def test_planning_reads_no_tensor_data() -> None:
    source = CountingSource(bert_tensors())
    the_plan = plan("fuse-qkv+quantize-int8", source)
    assert source.loads == []
    assert the_plan.source == "<counting>"


def test_the_lazy_module_loads_on_demand() -> None:
    the_plan = plan("cast:float16", CountingSource(bert_tensors()))
    func = the_plan.module["transform_params"]
    assert isinstance(func, Function) and func.params == ()
    callees = {
        b.value.op.global_symbol
        for b in func.bindings()
        if isinstance(b.value, Call) and isinstance(b.value.op, ExternFunc)
    }
    assert callees == {"get_item", "set_item"}


def test_only_the_inputs_the_transform_reads_are_planned() -> None:
    tensors = bert_tensors()
    name = "bert.pooler.dense.weight"
    the_plan = plan(lambda p: {"pooler": p[name].T}, CountingSource(tensors))
    assert [info.name for info in the_plan.inputs] == [name]
    assert the_plan.source_tensors == len(tensors)
    assert the_plan.bytes_in == tensors[name].nbytes
    assert the_plan.spec == "<lambda>"


def test_a_budget_that_holds(llama_path: Path) -> None:
    the_plan = plan("fuse-qkv", llama_path, budget="1GiB")
    assert the_plan.budget == parse_size("1GiB") and the_plan.fits
    the_plan.check_budget()


def test_a_budget_that_cannot_hold_says_where_and_how_much(llama_path: Path) -> None:
    the_plan = plan("fuse-qkv", llama_path, budget=1024)
    assert not the_plan.fits
    message = the_plan.budget_message
    assert message is not None
    assert "memory budget of 1024 bytes (1.0 KiB) is too small: binding" in message
    assert f"expected a budget of at least {the_plan.predicted_peak_bytes} bytes" in message
    assert f"at binding {the_plan.peak_binding} ({the_plan.peak_tensor})" in message
    with pytest.raises(BudgetError):
        the_plan.check_budget()


def test_peaks_and_budget_refusals_name_the_tensor_of_their_binding(llama_path: Path) -> None:
    the_plan = plan("fuse-qkv", llama_path, budget=1024)
    output_names = {info.name for info in the_plan.outputs}
    assert the_plan.peak_tensor is not None
    kind, _, quoted = the_plan.peak_tensor.partition(" ")
    assert kind == "output" and quoted.strip("'") in output_names
    message = the_plan.budget_message or ""
    # the first binding over budget is the first load: it names the input it reads
    first = the_plan.inputs[0].name
    assert f"(input {first!r}) needs" in message, message
    assert the_plan.binding_label(the_plan.peak_binding) in message
    assert the_plan.summary()["peak_tensor"] == the_plan.peak_tensor


def test_every_binding_of_a_chunked_plan_that_holds_a_tensor_names_one(llama_path: Path) -> None:
    from lazyparams.engine.binding_names import binding_tensors

    the_plan = plan("cast:float16", llama_path, budget="40KiB")
    assert the_plan.fits and the_plan.chunked_outputs
    tensors = binding_tensors(the_plan.function)
    sources = {f"input {info.name!r}" for info in the_plan.inputs}
    targets = {f"output {info.name!r}" for info in the_plan.outputs}
    assert set(tensors.values()) <= sources | targets
    assert sources <= set(tensors.values())  # a row block's load names its input too
    assert the_plan.peak_tensor in sources | targets


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers: expected a positive int, got 0"),
        ({"workers": True}, "workers: expected a positive int, got True"),
        ({"budget": "lots"}, "budget: expected a size like 512MiB, 4GiB or 5GB, got 'lots'"),
    ],
)
def test_bad_options_are_refused(llama_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConvertError) as err:
        plan("fuse-qkv", llama_path, **kwargs)
    assert message in str(err.value)


def test_a_source_that_is_neither_path_nor_source_is_refused() -> None:
    with pytest.raises(ConvertError, match="expected a checkpoint path or source, got int"):
        plan("fuse-qkv", 42)  # type: ignore[arg-type]


def test_plan_summary_is_plain_data(llama_path: Path) -> None:
    summary = plan("cast", llama_path, budget="1MiB").summary()
    assert summary["budget"] == 1 << 20 and summary["inputs"] == summary["outputs"]
    assert set(summary) >= {"predicted_peak_bytes", "eager_peak_bytes", "peak_binding", "fits"}
    assert read_all(llama_path)  # the source is closed again but still readable
