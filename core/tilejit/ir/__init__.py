"""TTIR: an SSA tile IR with structured control flow and an MLIR-like text form."""
from .types import (Type, IntType, FloatType, PointerType, TensorType, TensorDescType, FunctionType,
                    i1, i8, i16, i32, i64, f16, bf16, f32, f64, element_type, shape_of, with_element,
                    with_shape, is_int, is_float, is_ptr, is_tensor, is_block_ptr, FLOAT_FORMATS)
from .core import (Location, UNKNOWN_LOC, Value, OpResult, BlockArgument, Operation, Block, Region,
                   Module, Builder, make_func)
from .printer import print_module, print_op, DenseAttr
from .parser import parse_module
from .dialect import DialectContext, default_context
from .verifier import verify
from .ops import OPS, OpInfo, POINTER_PASSTHROUGH, info as op_info, is_removable_if_unused
