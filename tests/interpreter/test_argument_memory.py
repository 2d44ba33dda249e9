"""What memory a kernel argument gives the interpreter: exactly its own extent (a view never reaches the
rest of its tensor), and read-only memory stays read-only (stores refused with an error naming the
argument and the line, loads fine), for NumPy arrays and torch tensors alike."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

tilejit = pytest.importorskip("tilejit")
tl = pytest.importorskip("tilejit.language")
torch = pytest.importorskip("torch")
from tilejit.errors import InterpreterError  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@tilejit.jit
def fill16(p):
    tl.store(p + tl.arange(0, 16), tl.full([16], 7.0, tl.float32))


@tilejit.jit
def copy16(src, dst):
    offs = tl.arange(0, 16)
    tl.store(dst + offs, tl.load(src + offs))


@tilejit.jit
def strided_fill(p, n, stride):
    offs = tl.arange(0, 16)
    tl.store(p + offs * stride, tl.full([16], 5.0, tl.float32), mask=offs < n)


@tilejit.jit
def add_one_atomically(p):
    tl.atomic_add(p + tl.arange(0, 16), 1.0)


def _views():
    return [("torch", torch.zeros(32)), ("numpy", np.zeros(32, np.float32))]


# --- every argument is bounded by its own extent --------------------------------------------------

@pytest.mark.parametrize("kind,base", _views())
def test_stores_past_a_view_do_not_reach_the_rest_of_the_tensor(kind, base):
    # 16 stores into base[8:16]: the torch view was checked against the whole storage, so the last
    # eight silently overwrote base[16:24].
    with pytest.raises(InterpreterError, match="out-of-bounds access to argument 'p' at element offset 8 "
                                               r"\(it holds 8 elements\)") as info:
        fill16[(1,)](base[8:16])
    assert info.value.line is not None
    assert not np.asarray(base).any()


@pytest.mark.parametrize("kind,base", _views())
def test_loads_past_a_view_are_out_of_bounds(kind, base):
    out = torch.zeros(16) if kind == "torch" else np.zeros(16, np.float32)
    with pytest.raises(InterpreterError, match="argument 'src'"):
        copy16[(1,)](base[8:16], out)          # inside the tensor, past the view
    copy16[(1,)](base[16:32], out)  # exactly its extent: fine


@pytest.mark.parametrize("kind,base", _views())
def test_a_strided_view_spans_its_lowest_to_highest_element(kind, base):
    view = base[1::2]                       # 16 elements, base[1], base[3], ..., base[31]
    strided_fill[(1,)](view, 16, 2)         # the kernel steps over the view's elements itself
    values = np.asarray(base)
    assert (values[1::2] == 5).all() and not values[0::2].any()
    # Between its elements is still inside the span [base[1], base[31]] that the view addresses.
    strided_fill[(1,)](view, 16, 1)
    assert (values[1:17] == 5).all() and not values[0] and not values[18::2].any()
    with pytest.raises(InterpreterError, match="argument 'p'"):
        strided_fill[(1,)](base[1:17:2], 16, 2)   # 8 elements spanning 15 floats: offset 16 is past it


def test_views_of_one_tensor_as_two_arguments():
    base = torch.arange(32, dtype=torch.float32)
    copy16[(1,)](base[0:16], base[16:32])
    assert base[16:].tolist() == list(range(16))


# --- read-only memory -----------------------------------------------------------------------------

def _bytes_tensor(data: bytes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that the buffer is not writable
        return torch.frombuffer(data, dtype=torch.float32)


def test_store_through_a_tensor_over_bytes_is_refused_and_names_the_argument():
    data = bytes(64)
    with pytest.raises(InterpreterError, match="store to argument 'p', whose memory is read-only") as info:
        fill16[(1,)](_bytes_tensor(data))
    assert info.value.line is not None and "tl.store" in str(info.value)
    assert data == bytes(64)  # the immutable object was changed in place


def test_a_bytes_object_whose_header_is_on_the_previous_page_is_still_read_only():
    # CPython's allocator pools are 16 KiB, so a small bytes object can start on one 4 KiB page and
    # hold its data on the next: the read-only check must not depend on where the allocator put it
    # (CI once failed the test above on exactly that).
    kept = []
    for _ in range(20000):
        data = bytes(64)
        tensor = _bytes_tensor(data)
        if tensor.data_ptr() % 4096 < 32:
            break
        kept.append(data)  # keep it alive so the next object lands elsewhere
    else:
        pytest.skip("no bytes object straddled a page boundary in 20000 allocations")
    with pytest.raises(InterpreterError, match="store to argument 'p', whose memory is read-only"):
        fill16[(1,)](tensor)
    assert data == bytes(64)


def test_a_read_only_argument_that_is_only_loaded_works():
    data = np.arange(16, dtype=np.float32).tobytes()
    out = torch.zeros(16)
    copy16[(1,)](_bytes_tensor(data), out)
    assert out.tolist() == list(range(16))
    array = np.arange(16, dtype=np.float32)
    array.flags.writeable = False
    out.zero_()
    copy16[(1,)](array, out)
    assert out.tolist() == list(range(16))


# (A torch tensor made with `torch.from_numpy` of a read-only array is ordinary writable memory to
# torch, which drops the flag with a warning: only the memory itself can tell, as for a memory map.)
@pytest.mark.parametrize("make", [lambda a: a, lambda a: a[::2]], ids=["numpy", "numpy-strided"])
def test_store_to_a_read_only_array_fails_at_store_time(make):
    array = np.zeros(32, np.float32)
    array.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arg = make(array)
    with pytest.raises(InterpreterError, match="store to argument 'p', whose memory is read-only"):
        fill16[(1,)](arg)


def test_atomics_on_read_only_memory_are_refused():
    # NumPy's ufunc.at writes read-only arrays: the atomic changed memory the caller had locked.
    array = np.zeros(16, np.float32)
    array.flags.writeable = False
    with pytest.raises(InterpreterError, match="store to argument 'p', whose memory is read-only"):
        add_one_atomically[(1,)](array)
    assert not array.any()
    with pytest.raises(InterpreterError, match="argument 'p'"):
        add_one_atomically[(1,)](_bytes_tensor(bytes(64)))


def test_read_only_memory_map_through_torch(tmp_path):
    """np.memmap(mode='r') under a torch tensor: a store used to kill the process (SIGSEGV). Run in a
    child process so that a regression cannot take the test session down."""
    path = tmp_path / "data.bin"
    np.arange(16, dtype=np.float32).tofile(path)
    script = textwrap.dedent(f"""
        import warnings, numpy as np, torch, tilejit, tilejit.language as tl
        from tilejit.errors import InterpreterError

        @tilejit.jit
        def copy_then_store(src, dst, STORE: tl.constexpr):
            offs = tl.arange(0, 16)
            tl.store(dst + offs, tl.load(src + offs))
            if STORE:
                tl.store(src + offs, tl.load(src + offs) + 1)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mapped = torch.from_numpy(np.memmap({str(path)!r}, dtype=np.float32, mode="r"))
        out = torch.zeros(16)
        copy_then_store[(1,)](mapped, out, STORE=False)
        assert out.tolist() == list(range(16))
        try:
            copy_then_store[(1,)](mapped, out, STORE=True)
        except InterpreterError as exc:
            print("refused:", exc)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(_ROOT, "core"), os.path.join(_ROOT, "backends", "interpreter"), os.environ.get("PYTHONPATH", "")]))
    program = tmp_path / "store_to_memmap.py"  # a file: @jit reads the kernel's source
    program.write_text(script)
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "refused:" in result.stdout and "store to argument 'src', whose memory is read-only" in result.stdout
    assert np.fromfile(path, dtype=np.float32).tolist() == list(range(16))
