"""TTIR produced by the frontend, checked with FileCheck, and its print/parse round trip."""
import pytest

import tilejit
import tilejit.language as tl
from tilejit import ir

from . import kernels as k
from .helpers import filecheck, make_module, ttir

VEC = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}


def test_vector_add():
    text = ttir(k.add_kernel, VEC, {"BLOCK_SIZE": 1024}, {(0,): [["tt.divisibility", 16]]})
    filecheck(text, """
CHECK: tt.func public @add_kernel(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32>, %out_ptr: !tt.ptr<f32>, %n_elements: i32)
CHECK: %[[PID:[0-9]+]] = tt.get_program_id {axis = 0} : () -> (i32)
CHECK: %[[BS:[0-9]+]] = arith.constant {value = 1024} : i32
CHECK-NEXT: arith.muli %[[PID]], %[[BS]]
CHECK: tt.make_range {start = 0, end = 1024} : () -> (tensor<1024xi32>)
CHECK: arith.cmpi {{.*}} {predicate = "slt"}
CHECK: tt.addptr {{.*}} -> (tensor<1024x!tt.ptr<f32>>)
CHECK: tt.load
CHECK: tt.load
CHECK: arith.addf {{.*}} : (tensor<1024xf32>, tensor<1024xf32>) -> (tensor<1024xf32>)
CHECK: tt.store
CHECK-NEXT: tt.return
""")


def test_locations_point_at_user_lines():
    module = make_module(k.add_kernel, VEC, {"BLOCK_SIZE": 64})
    func = module.functions[0]
    body = func.regions[0].blocks[0].ops
    first_line = k.add_kernel.starting_line_number
    load = next(op for op in body if op.name == "tt.load")
    assert load.loc.file.endswith("kernels.py")
    assert load.loc.line == first_line + 4  # `x = tl.load(...)`
    assert load.loc.col == 9
    assert func.loc.line == first_line


def test_softmax_reductions():
    text = ttir(k.softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32",
                                   "out_stride": "i32", "n_cols": "i32"}, {"BLOCK_SIZE": 128})
    filecheck(text, """
CHECK: arith.constant {value = -inf} : f32
CHECK: tt.load
CHECK: tt.call {{.*}}callee = "max
CHECK: arith.subf
CHECK: math.exp
CHECK: tt.call {{.*}}callee = "sum
CHECK: arith.divf
CHECK-DAG: arith.maxnumf
CHECK-DAG: tt.reduce {{.*}} {axis = 0}
CHECK-DAG: tt.reduce.return
""")


def test_layer_norm_loops():
    text = ttir(k.layer_norm_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp32", "b_ptr": "*fp32",
                                      "stride": "i32", "N": "i32", "eps": "fp32"}, {"BLOCK": 256})
    filecheck(text, """
CHECK: scf.for
CHECK: arith.extf {{.*}} to tensor<256xf32>
CHECK: scf.yield
CHECK: arith.sitofp
CHECK: arith.divf
CHECK: scf.for
CHECK: arith.select
CHECK: math.sqrt
CHECK: scf.for
CHECK: tt.store
""")


def test_matmul_dot_and_loop_carried_pointers():
    sig = {n: "i32" for n in "M N K stride_am stride_ak stride_bk stride_bn stride_cm stride_cn".split()}
    sig.update(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16")
    text = ttir(k.matmul_kernel, sig, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32})
    filecheck(text, """
CHECK: tt.expand_dims {{.*}} {axis = 1} : (tensor<64xi32>) -> (tensor<64x1xi32>)
CHECK: tt.expand_dims {{.*}} {axis = 0} : (tensor<32xi32>) -> (tensor<1x32xi32>)
CHECK: tt.broadcast
CHECK: = scf.for {{.*}} {tt.num_stages = 3} (
CHECK: ^bb(%{{.*}}: i32, %{{.*}}: tensor<64x32x!tt.ptr<f16>>, %{{.*}}: tensor<64x64xf32>, %{{.*}}: tensor<32x64x!tt.ptr<f16>>):
CHECK: tt.dot {{.*}} {inputPrecision = "tf32", maxNumImpreciseAcc = 0} : (tensor<64x32xf16>, tensor<32x64xf16>, tensor<64x64xf32>) -> (tensor<64x64xf32>)
CHECK: tt.addptr {{.*}} -> (tensor<64x32x!tt.ptr<f16>>)
CHECK: scf.yield
CHECK: arith.truncf {{.*}} : tensor<64x64xf32> to tensor<64x64xf16>
CHECK: arith.andi {{.*}} tensor<64x64xi1>
""")


def test_attention_compiles():
    text = ttir(k.attention_kernel, {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16",
                                     "seq_len": "i32", "sm_scale": "fp32"},
                {"BLOCK_M": 64, "BLOCK_N": 32, "HEAD": 64})
    filecheck(text, """
CHECK: scf.for
CHECK: tt.dot {{.*}} -> (tensor<64x32xf32>)
CHECK: math.exp
CHECK: arith.truncf {{.*}} to tensor<64x32xf16>
CHECK: tt.dot {{.*}} -> (tensor<64x64xf32>)
CHECK: scf.yield
""")


def test_reduce_region_and_argmax():
    text = ttir(k.reduce_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 32})
    filecheck(text, """
CHECK: tt.reduce %{{[0-9]+}} {axis = 0} (
CHECK-NEXT: {
CHECK-NEXT: ^bb(%[[A:arg[0-9]+]]: f32, %[[B:arg[0-9]+]]: f32):
CHECK-NEXT: tt.call %[[A]], %[[B]] {callee = "_add_combine{{.*}}"} : (f32, f32) -> (f32)
CHECK-NEXT: tt.reduce.return
CHECK: ) : (tensor<32xf32>) -> (f32)
CHECK: tt.func private @_add_combine
CHECK: arith.addf
CHECK: ^bb(%{{.*}}: f32, %{{.*}}: i32, %{{.*}}: f32, %{{.*}}: i32):
CHECK: ) : (tensor<32xf32>, tensor<32xi32>) -> (f32, i32)
""")


def test_nested_call_multiple_results():
    text = ttir(k.call_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 16})
    filecheck(text, """
CHECK: %[[R:[0-9]+]], %[[S:[0-9]+]] = tt.call %{{[0-9]+}} {callee = "[[F:_scale[A-Za-z0-9_]*]]"} : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
CHECK: arith.addf %[[R]], %[[S]]
CHECK: tt.func private @[[F]](%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
CHECK: arith.constant {value = 2.0} : f32
CHECK: arith.mulf
CHECK: tt.return
""")


def test_call_specializations_are_reused():
    module = make_module(k.call_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 16})
    assert [f.attrs["sym_visibility"] for f in module.functions] == ["public", "private"]


def test_control_flow():
    text = ttir(k.control_kernel, {"x_ptr": "*fp32", "n": "i32", "flag": "i32"}, {"BLOCK": 16})
    filecheck(text, """
CHECK: %[[C:[0-9]+]] = arith.cmpi %flag, %{{[0-9]+}} {predicate = "sgt"} : (i32, i32) -> (i1)
CHECK: %[[Y:[0-9]+]] = scf.if %[[C]] (
CHECK: arith.addf
CHECK: scf.yield
CHECK: arith.mulf
CHECK: scf.yield
CHECK: ) : (i1) -> (tensor<16xf32>)
CHECK: scf.for %{{[0-9]+}}, %n, %{{[0-9]+}}, %{{[0-9]+}} (
CHECK: ^bb(%{{.*}}: i32, %[[ACC:arg[0-9]+]]: tensor<16xf32>):
CHECK: arith.addf %[[ACC]], %[[Y]]
CHECK: scf.yield
CHECK: scf.while
CHECK: arith.cmpi {{.*}} {predicate = "slt"}
CHECK: scf.condition
CHECK: arith.addi
CHECK: scf.yield
CHECK: ) : (i32) -> (i32)
CHECK: arith.sitofp
""")


@pytest.mark.parametrize("mode,op", [(1, "arith.mulf"), (0, "arith.subf")])
def test_static_range_and_constexpr_if_fold(mode, op):
    text = ttir(k.static_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 8, "MODE": mode})
    assert "scf.for" not in text and "scf.if" not in text
    filecheck(text, f"""
CHECK: arith.constant {{value = 0.0}}
CHECK: arith.addf
CHECK: arith.constant {{value = 1.0}}
CHECK: arith.addf
CHECK: arith.constant {{value = 2.0}}
CHECK: arith.addf
CHECK: arith.constant {{value = 4.0}}
CHECK: {op}
""")


def test_type_promotion():
    text = ttir(k.promote_kernel, {"a_ptr": "*i8", "b_ptr": "*i32", "h_ptr": "*fp16", "u_ptr": "*u32",
                                   "out_ptr": "*i32"}, {"BLOCK": 16})
    filecheck(text, """
CHECK: arith.extsi {{.*}} : tensor<16xi8> to tensor<16xi32>
CHECK: arith.addi {{.*}} tensor<16xi32>
CHECK: arith.constant {value = 2.0} : f16
CHECK: arith.mulf {{.*}} : (tensor<16xf16>, tensor<16xf16>) -> (tensor<16xf16>)
CHECK: arith.cmpi {{.*}} {predicate = "ult"}
CHECK: arith.divsi
CHECK: arith.remsi
CHECK: arith.shrui
CHECK: arith.extui {{.*}}: tensor<16xi1> to tensor<16xi32>
CHECK: arith.extf {{.*}}: tensor<16xf16> to tensor<16xf32>
CHECK-NEXT: arith.fptosi {{.*}}: tensor<16xf32> to tensor<16xi32>
""")


def test_pointer_augmented_assignment():
    text = ttir(k.layer_norm_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp32", "b_ptr": "*fp32",
                                      "stride": "i32", "N": "i32", "eps": "fp32"}, {"BLOCK": 256})
    filecheck(text, """
CHECK: %[[OFF:[0-9]+]] = arith.muli %{{[0-9]+}}, %stride : (i32, i32) -> (i32)
CHECK-NEXT: tt.addptr %x_ptr, %[[OFF]] : (!tt.ptr<f16>, i32) -> (!tt.ptr<f16>)
""")


def test_block_pointers():
    text = ttir(k.block_ptr_kernel, {"a_ptr": "*fp16", "M": "i32", "N": "i32", "stride_m": "i32"}, {"BLOCK": 32})
    filecheck(text, """
CHECK: arith.extsi {{.*}}: i32 to i64
CHECK: tt.make_block_ptr {{.*}} {order = [1, 0]} : (!tt.ptr<f16>, i64, i64, i64, i64, i32, i32) -> (!tt.ptr<tensor<32x32xf16>>)
CHECK: tt.load {{.*}}boundary_check = [0, 1], padding = "zero"
CHECK: tt.advance
CHECK: tt.store {{.*}}boundary_check = [0]
""")


def test_early_return_becomes_scf_if_results():
    text = ttir(k.early_return_kernel, {"p": "*fp32", "flag": "i32"})
    filecheck(text, """
CHECK: tt.func private @_early_return
CHECK: %[[R:[0-9]+]] = scf.if
CHECK: arith.addf
CHECK: scf.yield
CHECK: arith.subf
CHECK: scf.yield
CHECK: ) : (i1) -> (f32)
CHECK-NEXT: tt.return %[[R]] : (f32) -> ()
""")


def test_atomics():
    text = ttir(k.atomics_kernel, {"p": "*fp32", "q": "*i32"}, {"BLOCK": 16})
    filecheck(text, """
CHECK: tt.atomic_rmw {{.*}} {atomic_rmw_op = "fadd", sem = "acq_rel", scope = "gpu"}
CHECK: tt.atomic_rmw {{.*}} {atomic_rmw_op = "max", sem = "acq_rel", scope = "gpu"}
CHECK: tt.atomic_cas
""")


ALL = [
    (k.add_kernel, VEC, {"BLOCK_SIZE": 256}),
    (k.softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
                        "n_cols": "i32"}, {"BLOCK_SIZE": 128}),
    (k.reduce_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 32}),
    (k.control_kernel, {"x_ptr": "*fp32", "n": "i32", "flag": "i32"}, {"BLOCK": 16}),
    (k.promote_kernel, {"a_ptr": "*i8", "b_ptr": "*i32", "h_ptr": "*fp16", "u_ptr": "*u32", "out_ptr": "*i32"},
     {"BLOCK": 16}),
    (k.block_ptr_kernel, {"a_ptr": "*fp16", "M": "i32", "N": "i32", "stride_m": "i32"}, {"BLOCK": 32}),
    (k.early_return_kernel, {"p": "*fp32", "flag": "i32"}, {}),
    (k.atomics_kernel, {"p": "*fp32", "q": "*i32"}, {"BLOCK": 16}),
    (k.attention_kernel, {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16",
                          "seq_len": "i32", "sm_scale": "fp32"}, {"BLOCK_M": 64, "BLOCK_N": 32, "HEAD": 64}),
]


@pytest.mark.parametrize("kernel,sig,consts", ALL, ids=[a[0].__name__ for a in ALL])
def test_round_trip(kernel, sig, consts):
    text = ir.print_module(make_module(kernel, sig, consts))
    assert ir.print_module(ir.parse_module(text)) == text


def test_constexpr_by_index_and_hash():
    from tilejit.frontend import ASTSource
    a = ASTSource(k.add_kernel, VEC, {(4,): 128})
    b = ASTSource(k.add_kernel, VEC, {"BLOCK_SIZE": 256})
    assert a.constexprs == {"BLOCK_SIZE": 128}
    assert a.hash() != b.hash() and a.hash() == ASTSource(k.add_kernel, VEC, {"BLOCK_SIZE": 128}).hash()
    assert a.name == "add_kernel"


def test_ir_source_round_trip(tmp_path):
    from tilejit.frontend import IRSource
    text = ir.print_module(make_module(k.add_kernel, VEC, {"BLOCK_SIZE": 64}))
    path = tmp_path / "add.ttir"
    path.write_text(text)
    src = IRSource(str(path))
    assert src.name == "add_kernel"
    assert src.signature == {"arg0": "*fp32", "arg1": "*fp32", "arg2": "*fp32", "arg3": "i32"}
    assert ir.print_module(src.make_ir(None, None)) == text
    assert IRSource(text).hash() == src.hash()


@tilejit.jit
def _named_args(val, arg1, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    for i in range(0, arg1):
        tl.store(out_ptr + offs, val + i)


def test_function_arguments_print_under_their_python_names():
    """As Triton's TTIR (`%val: f16`); a name that could be a positional `%argN` keeps its position,
    and the arguments of nested blocks go on counting after the function's."""
    text = ttir(_named_args, {"val": "fp16", "arg1": "i32", "out_ptr": "*fp16"}, {"N": 16})
    filecheck(text, """
CHECK: tt.func public @_named_args(%val: f16, %arg1: i32, %out_ptr: !tt.ptr<f16>) -> ()
CHECK: scf.for %{{[0-9]+}}, %arg1, %{{[0-9]+}} (
CHECK: ^bb(%arg3: i32):
CHECK: tt.splat %out_ptr
CHECK: arith.addf %val, %{{[0-9]+}}
""")
    module = ir.parse_module(text)
    assert ir.print_module(module, with_locations=False) == text
    assert [a.name_hint for a in module.functions[0].regions[0].blocks[0].args] == ["val", None, "out_ptr"]
