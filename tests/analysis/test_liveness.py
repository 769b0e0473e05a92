"""liveness: where each value is defined, where it is last used, what dies after each binding."""

from __future__ import annotations

from lazyparams.analysis import PARAM, RESULT, liveness, used_vars
from lazyparams.ir import Function, Tuple
from lazyparams.script import ir as I
from lazyparams.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3, 2), "float32")):
        a = R.permute_dims(x, axes=[1, 0])
        b = R.add(a, y)
        c = R.astype(b, "float16")
        unused = R.astype(a, "float16")
        return (c, y)


def _main() -> Function:
    func = Module["main"]
    assert isinstance(func, Function)
    return func


def _named(func: Function) -> dict[str, object]:
    named: dict[str, object] = {p.name_hint: p for p in func.params}
    named.update({b.var.name_hint: b.var for b in func.bindings()})
    return named


def test_definitions_and_last_uses_are_indexed_by_binding() -> None:
    func = _main()
    live = liveness(func)
    v = _named(func)
    assert live.defined_at[v["x"]] == PARAM
    assert live.defined_at[v["c"]] == 2
    assert live.last_use[v["x"]] == 0
    assert live.last_use[v["a"]] == 3  # read again by `unused`
    assert live.last_use[v["b"]] == 2
    assert live.last_use[v["c"]] == RESULT
    assert live.last_use[v["y"]] == RESULT  # the result reads it after binding 1 did


def test_dies_at_lists_each_value_once_at_its_last_reader() -> None:
    func = _main()
    live = liveness(func)
    v = _named(func)
    assert live.dies_at == ((v["x"],), (), (v["b"],), (v["a"],))
    assert live.result_uses == (v["c"], v["y"])


def test_values_never_read_are_dead_and_users_are_found() -> None:
    func = _main()
    live = liveness(func)
    v = _named(func)
    assert live.is_dead(v["unused"])
    assert not live.is_dead(v["a"])
    assert live.users(v["a"]) == [1, 3]


def test_used_vars_keeps_first_appearance_order_without_repeats() -> None:
    func = _main()
    v = _named(func)
    assert used_vars(Tuple((v["y"], v["x"], v["y"]))) == [v["y"], v["x"]]  # type: ignore[arg-type]
