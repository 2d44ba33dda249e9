"""Layout mapping properties: every element is held by some thread, exactly as often as the layout replicates."""
from collections import Counter

import pytest

from tilejit import ir
from tilejit.gpu.layouts import BlockedEncoding, DotOperandEncoding, SliceEncoding
from tilejit_nvidia.layouts import NvidiaMmaEncoding

parse_encoding = ir.default_context().parse_encoding


def _counts(layout):
    return Counter(coords for _, coords in layout.all_owners())


@pytest.mark.parametrize("enc,shape", [
    (BlockedEncoding([4], [32], [4], [0]), (1024,)),
    (BlockedEncoding([4], [32], [4], [0]), (128,)),
    (BlockedEncoding([1, 4], [4, 8], [4, 1], [1, 0]), (64, 64)),
    (BlockedEncoding([2, 1], [8, 8], [1, 4], [0, 1]), (32, 64)),
    (NvidiaMmaEncoding(2, 0, [2, 2]), (64, 32)),
    (DotOperandEncoding(0, NvidiaMmaEncoding(2, 0, [2, 2]), 2), (32, 32)),
    (DotOperandEncoding(1, NvidiaMmaEncoding(2, 0, [2, 2]), 2), (32, 32)),
])
def test_every_element_owned_uniformly(enc, shape):
    layout = enc.to_linear(shape)
    counts = _counts(layout)
    numel = 1
    for s in shape:
        numel *= s
    assert len(counts) == numel
    assert all(all(0 <= c < s for c, s in zip(k, shape)) for k in counts)
    zero_bits = sum(1 for b in layout.lanes + layout.warps if not any(b))
    assert set(counts.values()) == {1 << zero_bits}


def test_small_tensor_replicates_over_warps():
    layout = BlockedEncoding([4], [32], [4], [0]).to_linear((128,))
    assert layout.thread_elements(0, 0) == layout.thread_elements(0, 3) == [(0,), (1,), (2,), (3,)]


def test_mma_accumulator_fragment_matches_ptx_isa():
    layout = NvidiaMmaEncoding(2, 0, [1, 1]).to_linear((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        assert layout.thread_elements(lane, 0) == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def test_slice_is_parent_without_dim():
    parent = BlockedEncoding([1, 4], [4, 8], [4, 1], [1, 0])
    rows = SliceEncoding(1, parent).to_linear((64,))
    full = parent.to_linear((64, 64))
    for lane in range(32):
        for warp in range(4):
            assert {c[0] for c in full.thread_elements(lane, warp)} == {c[0] for c in rows.thread_elements(lane, warp)}


@pytest.mark.parametrize("enc", [
    BlockedEncoding([4], [32], [4], [0]),
    SliceEncoding(0, BlockedEncoding([1, 4], [4, 8], [4, 1], [1, 0])),
    DotOperandEncoding(0, NvidiaMmaEncoding(2, 0, [2, 2]), 2),
])
def test_print_parse_round_trip(enc):
    assert parse_encoding(str(enc)) == enc
    t = ir.TensorType((32, 32) if isinstance(enc, DotOperandEncoding) else (64,), ir.f32, enc)
    text = f"module {{\n  tt.func public @k() -> () {{\n    %0 = arith.constant {{value = 0.0}} : {t}\n    tt.return : () -> ()\n  }}\n}}\n"
    assert ir.print_module(ir.parse_module(text), with_locations=False) == text


@pytest.mark.parametrize("res,shape,order", [
    (BlockedEncoding((8, 1), (8, 4), (1, 4), (0, 1)), (64, 64), (1, 0)),     # attention's K, loaded [D, N]
    (BlockedEncoding((1, 8), (4, 8), (4, 1), (1, 0)), (32, 128), (1, 0)),
    (BlockedEncoding((2, 4), (16, 2), (2, 2), (1, 0)), (16, 8), (1, 0)),      # replicated over warps
    (BlockedEncoding((1, 2, 4), (2, 4, 4), (1, 2, 2), (2, 1, 0)), (4, 16, 32), (2, 0, 1)),
])
def test_transposed_blocked_holds_the_same_elements_per_thread(res, shape, order):
    """`tt.trans(x, order)` is a register renaming when x has `transposed_blocked(result layout)`:
    every thread holds, register for register, the elements the result puts there (what
    `lower_trans` relies on)."""
    from tilejit.gpu.layouts import transposed_blocked
    src_shape = [0] * len(shape)
    for i, o in enumerate(order):
        src_shape[o] = shape[i]
    src = transposed_blocked(res, order).to_linear(tuple(src_shape))
    dst = res.to_linear(shape)
    swap = lambda c: tuple(c[o] for o in order)  # noqa: E731 - source coords -> result coords
    for warp in range(dst.num_warps):
        for lane in range(dst.num_lanes):
            assert [swap(c) for c in src.thread_elements(lane, warp)] == dst.thread_elements(lane, warp)


_RENAMED = [
    (BlockedEncoding([1, 4], [4, 8], [4, 1], [1, 0]), (64, 64)),
    (BlockedEncoding([2, 1], [8, 8], [1, 4], [0, 1]), (32, 64)),
    (NvidiaMmaEncoding(2, 0, [2, 2]), (64, 32)),
    (BlockedEncoding([4], [32], [4], [0]), (128,)),    # replicated over warps
]


def _owners(layout):
    return {slot: coords for slot, coords in layout.all_owners()}


@pytest.mark.parametrize("enc,shape", _RENAMED)
def test_a_reshaped_layout_names_each_element_by_its_row_major_coordinates(enc, shape):
    import numpy as np
    layout = enc.to_linear(shape)
    numel = int(np.prod(shape))
    for new_shape in [(numel,), (2, numel // 2), (numel // 8, 2, 4)]:
        moved = _owners(layout.reshaped(new_shape))
        for slot, coords in _owners(layout).items():
            flat = int(np.ravel_multi_index(coords, shape))
            assert moved[slot] == tuple(int(c) for c in np.unravel_index(flat, new_shape))


@pytest.mark.parametrize("enc,shape", _RENAMED[:3])
def test_a_permuted_layout_names_each_element_by_its_permuted_coordinates(enc, shape):
    layout = enc.to_linear(shape)
    assert layout.permuted((1, 0)).shape == shape[::-1]
    moved = _owners(layout.permuted((1, 0)))
    for slot, coords in _owners(layout).items():
        assert moved[slot] == coords[::-1]


@pytest.mark.parametrize("enc,shape", _RENAMED)
def test_joined_and_split_layouts_hold_both_halves_in_one_thread(enc, shape):
    layout = enc.to_linear(shape)
    joined = layout.joined()
    owners = _owners(joined)
    for (register, lane, warp), coords in _owners(layout).items():
        assert owners[(2 * register, lane, warp)] == coords + (0,)
        assert owners[(2 * register + 1, lane, warp)] == coords + (1,)
    bit, back = joined.split_minor()
    assert bit == 0 and back == layout


def test_a_minor_dim_held_by_lanes_is_not_split_in_registers():
    layout = BlockedEncoding([1, 1], [16, 2], [4, 1], [1, 0]).to_linear((64, 2))
    assert layout.split_minor() is None


@pytest.mark.parametrize("enc,shape", _RENAMED)
def test_a_stacked_layout_holds_a_then_b_along_dim_0(enc, shape):
    layout = enc.to_linear(shape)
    owners = _owners(layout.stacked())
    half = layout.num_registers
    for (register, lane, warp), coords in _owners(layout).items():
        assert owners[(register, lane, warp)] == coords
        assert owners[(register + half, lane, warp)] == (coords[0] + shape[0],) + coords[1:]
