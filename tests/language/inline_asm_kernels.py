"""Kernels with `tl.inline_asm_elementwise` in PTX (Triton's test_core cases, rewritten here), shared
by the language test (run on a GPU, refused on the interpreter) and the NVIDIA cross-compile test."""
import tilejit
import tilejit.language as tl


@tilejit.jit
def funnel_shift_kernel(X, Y, Z, n: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    s = tl.full([BLOCK], n, tl.int32)
    z = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r, r, r", [x, y, s], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(Z + offs, z)


@tilejit.jit
def packed_bytes_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    # four int8 in one 32-bit register: each byte masked to 5 bits, then shifted left by 3
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F; shl.b32 $0, $0, 3;", "=r,r", [x], dtype=tl.int8,
                                  is_pure=True, pack=4)
    tl.store(Y + offs, y)


@tilejit.jit
def through_pointers_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    # not pure: the assembly loads and stores itself, and its (unused) result must not be dropped
    tl.inline_asm_elementwise("ld.global.b8 $0, [$1]; shl.b32 $0, $0, 3; st.global.b8 [$2], $0;", "=r,l,l",
                              [X + offs, Y + offs], dtype=tl.int8, is_pure=False, pack=1)


@tilejit.jit
def two_outputs_kernel(A, B, C, D, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(A + offs)
    b = tl.load(B + offs)
    c, d = tl.inline_asm_elementwise("sub.u32 $0, $2, $3; sub.u32 $1, $3, $2;", "=r,=r,r,r", [a, b],
                                     dtype=(tl.uint32, tl.uint32), is_pure=True, pack=1)
    tl.store(C + offs, c)
    tl.store(D + offs, d)


@tilejit.jit
def packed_two_outputs_kernel(A, B, C, D, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(A + offs)   # uint8: four to a register ($8)
    b = tl.load(B + offs)   # fp32: one a register ($9-$12)
    c, d = tl.inline_asm_elementwise(
        """
        {
            .reg .b8 tmp<4>;
            mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
            cvt.u32.u8 $0, tmp0;
            cvt.u32.u8 $1, tmp1;
            cvt.u32.u8 $2, tmp2;
            cvt.u32.u8 $3, tmp3;
        }
        cvt.rn.f32.s32 $4, $0;
        cvt.rn.f32.s32 $5, $1;
        cvt.rn.f32.s32 $6, $2;
        cvt.rn.f32.s32 $7, $3;
        max.f32 $4, $4, $9;
        max.f32 $5, $5, $10;
        max.f32 $6, $6, $11;
        max.f32 $7, $7, $12;
        """,
        "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", [a, b], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(C + offs, c)
    tl.store(D + offs, d)


@tilejit.jit
def half_pairs_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)   # fp16: two to a register
    y = tl.inline_asm_elementwise("add.rn.f16x2 $0, $1, $1;", "=r,r", [x], dtype=tl.float16, is_pure=True, pack=2)
    tl.store(Y + offs, y)


@tilejit.jit
def float_in_int_register_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    # fla's safe_dot pattern: an fp32 through an "r" register
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x * 2.0], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + offs, y)


@tilejit.jit
def special_registers_kernel(Out, Elapsed, Sm, N: tl.constexpr):
    start = tl.extra.cuda.globaltimer()
    offs = tl.arange(0, 128)
    for _ in range(N):
        tl.store(Out + offs, tl.load(Out + offs) + 1)
    end = tl.extra.cuda.globaltimer()
    tl.store(Elapsed, end - start)
    tl.store(Sm, tl.extra.cuda.smid())
