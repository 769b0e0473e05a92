"""Before modules of TVM's own pass tests, their text verbatim, as parser inputs.

From apache/tvm tests/python/relax/test_transform_lazy_transform_params.py ("lazy") and
test_transform_lift_transform_params.py ("lift"); the expectations are this project's own.
"""

# lazy: test_lazy_transform_params_with_symbolic_vars, Before
LAZY_SYMBOLIC_VARS = """
@I.ir_module(s_tir=True)
class Before:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((16, 16), dtype="float32"),
            R.Shape(
                ["slice_index"],
            ),
        ),
    ):
        # we expect ToNonDataflow and RemovePurityTracking to be invoked first
        R.func_attr({"relax.force_pure": True})
        cls = Before

        slice_index = T.int64()

        param = params[0]
        transformed = R.call_tir(
            cls.slice_buffer,
            (param, slice_index),
            out_ty=R.Tensor((16,), dtype="float32"),
        )
        output = (transformed,)
        return output

    @T.prim_func(private=True, s_tir=True)
    def slice_buffer(
        Input: T.Buffer((16, 16), "float32"),
        slice_index: T.int64,
        Output: T.Buffer(16, "float32"),
    ):
        for i in T.grid(16):
            with T.sblock("slice_buffer"):
                vi = T.axis.remap("S", [i])
                Output[vi] = Input[slice_index, vi]
"""

# lazy: test_param_shape_symbolic, Before
LAZY_PARAM_SHAPE_SYMBOLIC = """
@I.ir_module(s_tir=True)
class Before:
    @T.prim_func(s_tir=True)
    def transform_layout_IOHW_to_OIHW(var_w1: T.handle, var_out: T.handle):
        ic = T.int32()
        w1 = T.match_buffer(var_w1, (ic, 16, 3, 3), "float32")
        out = T.match_buffer(var_out, (16, ic, 3, 3), "float32")
        for ax0, ax1, ax2, ax3 in T.grid(16, ic, 3, 3):
            with T.sblock("layout_transform"):
                o, i, h, w = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
                T.reads(w1[i, o, h, w])
                T.writes(out[o, i, h, w])
                out[o, i, h, w] = w1[i, o, h, w]

    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((3, "ic", 3, 3), dtype="float32"),
            R.Tensor((16, 16, 3, 3), dtype="float32"),
        ),
    ) -> R.Tuple(
        R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor(("ic", 3, 3, 3), dtype="float32")
    ):
        ic = T.int64()
        # we expect ToNonDataflow and RemovePurityTracking to be invoked first
        R.func_attr({"relax.force_pure": True})
        cls = Before
        lv: R.Tensor((16, 16, 3, 3), dtype="float32") = params[1]
        lv1: R.Tensor((3, ic, 3, 3), dtype="float32") = params[0]
        lv2 = R.call_tir(
            cls.transform_layout_IOHW_to_OIHW,
            (lv1,),
            out_ty=R.Tensor((ic, 3, 3, 3), dtype="float32"),
        )
        gv: R.Tuple(
            R.Tensor((16, 16, 3, 3), dtype="float32"),
            R.Tensor((ic, 3, 3, 3), dtype="float32"),
        ) = (lv, lv2)
        return gv
"""

# lift: test_symbolic_var_from_shape, Before
LIFT_SYMBOLIC_VAR_FROM_SHAPE = """
@I.ir_module(s_tir=True)
class Before:
    @R.function
    def main(
        A: R.Tensor([16, 16], "int32"),
        B: R.Tensor([16, 16], "int32"),
        shape: R.Shape(["slice_index"]),
    ) -> R.Tensor([16], "int32"):
        R.func_attr({"num_input": 1})
        slice_index = T.int64()
        cls = Before
        with R.dataflow():
            B_slice = R.call_tir(
                cls.slice,
                [B, slice_index],
                out_ty=R.Tensor([16], dtype="int32"),
            )
            A_slice = R.call_tir(
                cls.slice,
                [A, slice_index],
                out_ty=R.Tensor([16], dtype="int32"),
            )
            A_scale = R.multiply(A_slice, B_slice)
            R.output(A_scale)
        return A_scale

    @T.prim_func(private=True, s_tir=True)
    def slice(
        Input_2d: T.Buffer(shape=[16, 16], dtype="int32"),
        slice_index: T.int64,
        Output_Slice: T.Buffer(shape=[16], dtype="int32"),
    ):
        T.func_attr({"tirx.noalias": True})
        for j in range(16):
            with T.sblock("T_full"):
                vj = T.axis.remap("S", [j])
                Output_Slice[vj] = Input_2d[slice_index, vj]
"""
