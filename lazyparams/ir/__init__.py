"""The Relax-style IR: nodes, struct info, IRModule, BlockBuilder, visitor/mutator, equality.

Imports numpy (dtypes) and `lazyparams.errors` only.
"""

from lazyparams.ir.block_builder import BlockBuilder
from lazyparams.ir.expr import (
    BaseFunc,
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    prim_value,
)
from lazyparams.ir.functor import ExprMutator, ExprVisitor
from lazyparams.ir.infer import is_pure_call, struct_info_of
from lazyparams.ir.module import IRModule
from lazyparams.ir.op_registry import OpInfo, OpParam, get_op, op_info, register_op
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.ir.structural import (
    assert_structural_equal,
    structural_equal,
    structural_hash,
)

__all__ = [
    "BaseFunc",
    "Binding",
    "BindingBlock",
    "BlockBuilder",
    "Call",
    "Constant",
    "DataflowBlock",
    "DataflowVar",
    "Expr",
    "ExprMutator",
    "ExprVisitor",
    "ExternFunc",
    "FuncStructInfo",
    "Function",
    "GlobalVar",
    "IRModule",
    "If",
    "MatchCast",
    "ObjectStructInfo",
    "Op",
    "OpInfo",
    "OpParam",
    "PrimStructInfo",
    "PrimValue",
    "SeqExpr",
    "ShapeExpr",
    "ShapeStructInfo",
    "StringImm",
    "StructInfo",
    "TensorStructInfo",
    "Tuple",
    "TupleGetItem",
    "TupleStructInfo",
    "Var",
    "VarBinding",
    "assert_structural_equal",
    "get_op",
    "is_pure_call",
    "op_info",
    "prim_value",
    "register_op",
    "struct_info_of",
    "structural_equal",
    "structural_hash",
]
