"""The NVIDIA matrix instructions `tt.dot` may use, as matrix units for the core's accelerate-matmul.

- `Wgmma` (sm_90): `wgmma.mma_async` m64nNk16, warps along M (each warpgroup of 4 warps one or
  more 64-row blocks; the warpgroups split N on a 64-row tile), B (and A when loaded there) read
  from shared memory by descriptor;
- `MmaSync` (sm_80+): `mma.sync.m16n8k16` (f16, bf16, fp8 upcast to f16), `m16n8k8.tf32` (fp32
  dots with inputPrecision tf32) and `m16n8k32.s8`, warps spread over the tile.
Both give `#ttg.nvidia_mma` layouts (version 3 and 2); a version-3 dot whose B does not stay in
shared memory runs mma.sync on the same registers.
"""
from __future__ import annotations

from typing import Optional, Tuple

from tilejit import ir
from .layouts import NvidiaMmaEncoding
from .shared_operands import WgmmaTile, operand_tile, staging_dims
from tilejit.gpu.target import DotSite, MatrixUnit


def mma_warps(shape, num_warps: int) -> Tuple[int, int]:
    """mma.sync's warps over an M x N tile: along M while the rows per warp stay >= 32, else N."""
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if shape[0] // (16 * wm) >= shape[1] // (8 * wn) and shape[0] >= 32 * wm:
            wm *= 2
        elif shape[1] >= 16 * wn:
            wn *= 2
        else:
            wm *= 2
    return (wm, wn)


FP8 = ("f8E4M3FN", "f8E5M2")


def mma_sync_kind(dot: DotSite) -> Optional[str]:
    """Which mma.sync form computes `dot` (`mma_sync.MMA_FORMS`), or None:
    - "f16"/"bf16": 16-bit operands of one type, f32 accumulator (or f16 for f16 operands:
      `out_dtype=tl.float16`, the hardware's own f16 accumulation, as Triton), m16n8k16;
    - "tf32": f32 operands with inputPrecision tf32, f32 accumulator, two m16n8k8 per K16 step;
    - "s8": i8 operands, i32 accumulator, m16n8k32 (K a multiple of 32);
    - "fp8": e4m3/e5m2 operands (mixed too), f32 or f16 accumulator: upcast to f16 (exactly), m16n8k16;
    - "f64": fp64 operands and accumulator, DMMA as Triton: eight m8n8k4 per m16n8 tile and K16 step,
      one m16n8k16 on sm_90 and later (`mma_sync._lower_mma` picks it by arch).
    M, N multiples of 16 and 8 for all; 2-D dots, or 3-D (batched) ones, each batch its own mma.sync tiles."""
    M, N, K = dot.shape
    if dot.rank not in (2, 3) or M % 16 or N % 8:
        return None
    a, b, out = dot.a_elem, dot.b_elem, dot.out_elem
    if a in ("f16", "bf16") and a == b and (out == "f32" or out == a == "f16") and K % 16 == 0:
        return a
    if a == b == "f32" and out == "f32" and dot.input_precision == "tf32" and K % 16 == 0:
        return "tf32"
    if a == b == "i8" and out == "i32" and K % 32 == 0:
        return "s8"
    if a in FP8 and b in FP8 and out in ("f32", "f16") and K % 16 == 0:
        return "fp8"
    if a == b == out == "f64" and K % 16 == 0:
        return "f64"
    return None


# wgmma's K per instruction (32 bytes of each operand row) by operand kind.
WGMMA_K = {"f16": 16, "bf16": 16, "fp8": 32, "tf32": 8}


def wgmma_kind(dot: DotSite) -> Optional[str]:
    """The wgmma form of `dot`, or None: f16/bf16 (f32 accumulator, f16 too for f16; A from shared
    memory or registers, either operand K- or MN-major), or fp8 (e4m3/e5m2, mixed too) and tf32 with
    an f32 accumulator, which wgmma reads only K-major from shared memory (the PTX ISA allows the
    transpose bits for 16-bit types alone; a tf32 tile loaded along M or N is transposed as it is
    copied)."""
    kind = mma_sync_kind(dot) if dot.rank == 2 else None   # wgmma has no batch
    if kind in ("f16", "bf16"):
        return kind
    if kind not in ("fp8", "tf32") or dot.out_elem != "f32" or dot.shape[2] % WGMMA_K[kind]:
        return None
    # fp8 wgmma accumulates in the tensor core's reduced precision over the whole K, as Triton does
    # by default on sm_90 (max_num_imprecise_acc = 2**30). A dot that asks for fp32 accumulation
    # every `max_num_imprecise_acc` elements gets it from wgmma too, as in Triton: partial sums of
    # that many products, added in fp32 (`wgmma._accumulate_in_chunks`).
    return kind


def _block_load(op: ir.Operation, name: str) -> Optional[ir.Operation]:
    """The load in the dot's block that operand `name` of dot `op` is, else None."""
    v = op.operand(name)
    load = v.owner if isinstance(v.owner, ir.Operation) else None
    return load if load is not None and load.name == "tt.load" and load.parent is op.parent else None


def _loaded_in_block(op: ir.Operation, name: str, k_dim: int) -> bool:
    return _block_load(op, name) is not None


def _loaded_k_major(op: ir.Operation, name: str, k_dim: int) -> bool:
    """Operand `name` of dot `op` is a load in the dot's block whose access runs along K (its
    coalesced layout's fastest dim), so its pipelined tile is K-major."""
    load = _block_load(op, name)
    order = getattr(load.results[0].type.encoding, "order", None) if load is not None else None
    return bool(order) and order[0] == k_dim


def _fp8_rewritable(dot: DotSite, op_idx: int) -> bool:
    """An fp8 operand loaded along its non-K dim in the dot's block (B along N, A along M) whose tile
    `ByteTranspose` rewrites K-major (viewed as [K, non-K])."""
    from .shared_operands import ByteTranspose
    load = _block_load(dot.op, "ab"[op_idx])
    order = getattr(load.results[0].type.encoding, "order", None) if load is not None else None
    M, N, K = dot.shape
    non_k = (M, N)[op_idx]
    return bool(order) and order[0] == op_idx and ByteTranspose((K, non_k), dot.num_warps).fits()


class MmaSync(MatrixUnit):
    name = "mma.sync.m16n8k16"

    def layout(self, dot: DotSite) -> Optional[NvidiaMmaEncoding]:
        if mma_sync_kind(dot) is None:
            return None
        if dot.rank == 3:   # batched: every warp along the batch (Triton's warpsPerTileV2 for rank 3)
            return NvidiaMmaEncoding(2, 0, (dot.num_warps, 1, 1), (1, 16, 8))
        M, N, _ = dot.shape
        warps = dot.chained_warps() or mma_warps((M, N), dot.num_warps)
        return NvidiaMmaEncoding(2, 0, warps, (16, 8))


class Wgmma(MatrixUnit):
    name = "wgmma.mma_async.m64nNk16"

    def layout(self, dot: DotSite) -> Optional[NvidiaMmaEncoding]:
        kind = wgmma_kind(dot)
        if kind is None:
            return None
        M, N, _ = dot.shape
        warps = self._warps(dot, M, N, kind)
        if warps is None:
            return None
        if kind in ("fp8", "tf32"):
            # Both tiles K-major, each row of K whole 128-byte swizzle slabs (the pipeline's wgmma
            # tile); otherwise the well-trodden mma.sync layout rather than version 3 without wgmma.
            # A tf32 operand loaded along M or N is transposed by its copies (one cp.async of 4 bytes
            # an element, `pipeline.wgmma_copy`); fp8 elements are too small for that: an fp8 B
            # loaded along N (or A along M) is rewritten K-major in shared memory every iteration
            # (`shared_operands.ByteTranspose`), as Triton does.
            # fp8 K of 64 or 32 bytes takes the narrower swizzles (`shared_operands.operand_tile`).
            # Outside loops the dot stages both fp8 operands K-major (`wgmma.stage_operand`).
            if kind == "fp8":
                K = dot.shape[2]
                tiles = operand_tile((M, K), 1, 1) is not None and operand_tile((K, N), 0, 1) is not None
                loaded = tiles and (not in_loop(dot.op)
                                    or ((_loaded_k_major(dot.op, "a", 1) or _fp8_rewritable(dot, 0))
                                        and (_loaded_k_major(dot.op, "b", 0) or _fp8_rewritable(dot, 1))))
            else:
                loaded = (dot.shape[2] * 4 % 128 == 0 and _loaded_in_block(dot.op, "a", 1)
                          and _loaded_in_block(dot.op, "b", 0))
            if not loaded:
                return None
        return NvidiaMmaEncoding(3, 0, warps, (16, N // warps[1], 16))

    def _warps(self, dot: DotSite, M: int, N: int, kind: str) -> Optional[Tuple[int, int]]:
        """(warps along M, along N). All along M when every warpgroup gets whole 64-row blocks; a
        chained dot (attention) takes that only when its partner asked for it too, so P stays in
        registers between the two dots. On a tile with fewer 64-row blocks than warpgroups (8 warps
        on 64 rows: fla's configs, Triton's [4, 2]) the warpgroups split N instead, each one
        `m64n(N/groups)`, for 16-bit dots whose B tile the groups can each start a descriptor in:
        K-major (a column block is a row offset), or N blocks of whole 128-byte slabs."""
        W = dot.num_warps
        chained = dot.chained_warps()
        # One warpgroup has one wgmma arrangement, all warps along M. Dots that share only indices,
        # or whose results meet after the loop (Liger's MoE backward: acc_gate and acc_up, 64x128
        # tiles, where the generic rule asks for warps along N), take it as Triton does: it
        # looks for chains forward from a dot's result only.
        single_group = W == 4 and not _shares_data_with_a_dot(dot.op)
        if (chained in (None, (W, 1)) or single_group) and self._fits(dot.op, M, N, W, kind):
            return (W, 1)
        groups = W // 4
        if kind not in ("f16", "bf16", "fp8") or W % 4 or groups < 2 or N % groups:
            return None
        # Dots of one block are "chained" when any values connect them (gla's two dots of a loop,
        # through their indices): only a result that is another dot's A needs all warps along M.
        if chained not in (None, (W, 1), (4, groups)) or _a_of_a_dot(dot.op):
            return None
        n = N // groups
        # fp8 B tiles are always K-major in shared memory (loaded so, or rewritten)
        if not self._fits(dot.op, M, n, 4, kind) or not (n % 64 == 0 or kind == "fp8" or _b_k_major(dot.op)):
            return None
        return (4, groups)

    @staticmethod
    def _fits(op: ir.Operation, M: int, N: int, warps: int, kind: str) -> bool:
        """Each warpgroup (4 warps) one or more m64nNk16 row blocks (M a multiple of 16 * num_warps,
        16 <= N <= 256 a power of two). In a loop, B is loaded (or its transposition) in the loop body
        of the dot, so that the pipeline can leave it in shared memory for the descriptor, or a 16-bit
        B is computed there (fla's state `h.to(bf16)`, a gated `v`), which the dot stages into shared
        memory each iteration (`wgmma.stage_operand`), as Triton's local_alloc; A is read through a
        descriptor too when it is loaded there, else from registers (the mma.sync A fragment, which
        wgmma takes as is). Outside loops a 16-bit B is staged into shared memory by the dot itself."""
        if warps % 4 or M % (16 * warps) or not 16 <= N <= 256 or N & (N - 1):
            return False
        loop = op.parent.parent_op if op.parent is not None else None
        if loop is not None and loop.name == "scf.for":
            b = op.operand("b")
            return (loaded_view(b, op.parent) is not None
                    or (kind in ("f16", "bf16") and computed_in(b, op.parent) and staging_dims(b.type.shape)))
        return not in_loop(op) and kind in ("f16", "bf16", "fp8")


def _a_of_a_dot(op: ir.Operation) -> bool:
    """Whether dot `op`'s A is computed from another dot's result in its block, or its result
    becomes another dot's A there (attention's P): what keeps a chained pair's warps along M."""
    block, seen = op.parent, set()
    work = [op.operand("a")]
    while work:   # back from A
        owner = work.pop().owner
        if not isinstance(owner, ir.Operation) or owner.parent is not block or id(owner) in seen:
            continue
        seen.add(id(owner))
        if owner.name == "tt.dot":
            return True
        work += [v for v in owner.operands if isinstance(v.type, ir.TensorType)]
    work, seen = [op.result], set()
    while work:   # forward from the result
        for user, index in work.pop().uses:
            if user.parent is not block or id(user) in seen:
                continue
            seen.add(id(user))
            if user.name == "tt.dot":
                if index == 0:
                    return True
                continue
            work += [r for r in user.results if isinstance(r.type, ir.TensorType)]
    return False


def _shares_data_with_a_dot(op: ir.Operation) -> bool:
    """Whether data, not only indices, flows between dot `op` and another dot of its block: its
    result reaches one (as any operand), or its A or accumulator is computed from one's result."""
    block = op.parent

    def reaches_a_dot(starts, forward: bool) -> bool:
        work, seen = list(starts), set()
        while work:
            v = work.pop()
            if forward:
                ops = [user for user, _ in v.uses]
            else:
                ops = [v.owner] if isinstance(v.owner, ir.Operation) else []
            for other in ops:
                if other.parent is not block or id(other) in seen:
                    continue
                seen.add(id(other))
                if other.name == "tt.dot" and other is not op:
                    return True
                work += [x for x in (other.results if forward else other.operands) if isinstance(x.type, ir.TensorType)]
        return False
    return reaches_a_dot([op.result], True) or reaches_a_dot([op.operand("a"), op.operand("c")], False)


def _b_k_major(op: ir.Operation) -> bool:
    """Whether the shared tile wgmma will read dot `op`'s B from is K-major: in a loop, a B loaded
    there keeps its load's contiguous dim (`pipeline.wgmma_copy`); any other B is staged from
    registers (`wgmma.staged_tile`), K-major when its K is whole 128-byte slabs (the dot asks for
    that orientation when its warpgroups split N)."""
    b = op.operand("b")
    loop = op.parent.parent_op if op.parent is not None else None
    view = loaded_view(b, op.parent) if loop is not None and loop.name == "scf.for" else None
    if view is not None:
        load, transposed = view
        order = getattr(load.results[0].type.encoding, "order", None)
        return bool(order) and order[0] == (1 if transposed else 0)
    return WgmmaTile(tuple(b.type.shape), 0).fits()


def in_loop(op: ir.Operation) -> bool:
    """Whether `op` is nested in an `scf.for` or `scf.while`, at any depth."""
    outer = op.parent_op()
    while outer is not None:
        if outer.name in ("scf.for", "scf.while"):
            return True
        outer = outer.parent_op()
    return False


def untransposed(value: ir.Value, block) -> Tuple[ir.Value, bool]:
    """(x, True) when `value` is `tl.trans(x)` computed in `block`, else (value, False): the tile in
    shared memory is x's either way, read transposed or not."""
    owner = value.owner if isinstance(value.owner, ir.Operation) else None
    if owner is not None and owner.name == "tt.trans" and owner.parent is block:
        return owner.operands[0], True
    return value, False


def computed_in(value: ir.Value, block) -> bool:
    """Whether `value` (or, for a `tl.trans` in `block`, the tile it transposes) is computed in
    registers by an op of `block` other than a load: a tile that no copy leaves in shared memory, so
    a wgmma dot stages it there."""
    value, _ = untransposed(value, block)
    owner = value.owner if isinstance(value.owner, ir.Operation) else None
    return owner is not None and owner.parent is block and owner.name != "tt.load"


def loaded_view(value: ir.Value, block) -> Optional[Tuple[ir.Operation, bool]]:
    """(load, transposed) when `value` is a `tt.load` of `block` or the `tt.trans` of one there (fla's
    `tl.dot(b_do, tl.trans(b_v))`: the pipelined tile is read through a descriptor either way, the
    transposition only swaps which of its dims is K), else None."""
    value, transposed = untransposed(value, block)
    owner = value.owner if isinstance(value.owner, ir.Operation) else None
    if owner is None or owner.name != "tt.load" or owner.parent is not block:
        return None
    return owner, transposed
