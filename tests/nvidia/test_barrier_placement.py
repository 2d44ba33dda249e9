"""`drop_unneeded_barriers`: a barrier stays exactly where an access before it and one after it may
touch the same shared bytes and one writes (hand-built LLVM IR, then a pipelined kernel's PTX)."""
import llvmlite.ir as llir
import pytest

from tilejit_nvidia.barriers import BARRIER, USER_BARRIER, drop_unneeded_barriers, is_barrier

I32 = llir.IntType(32)
RING, SCRATCH = (0, 4096), (4096, 1 << 40)


class _Kernel:
    def __init__(self):
        self.module = llir.Module()
        self.fn = llir.Function(self.module, llir.FunctionType(llir.VoidType(), []), "k")
        self.b = llir.IRBuilder(self.fn.append_basic_block("entry"))
        smem = llir.GlobalVariable(self.module, llir.ArrayType(llir.IntType(8), 0), "smem", addrspace=3)
        smem.type = llir.PointerType(addrspace=3)
        self.smem = smem
        self.spans = {}
        self.barrier_fn = llir.Function(self.module, llir.FunctionType(llir.VoidType(), []), BARRIER)

    def ptr(self, offset, span):
        p = self.b.gep(self.smem, [llir.Constant(I32, offset)], source_etype=I32)
        if span is not None:
            self.spans[id(p)] = span
        return p

    def barrier(self, user=False):
        call = self.b.call(self.barrier_fn, [])
        if user:
            call.set_metadata(USER_BARRIER, self.module.add_metadata([]))

    def store(self, offset, span=SCRATCH):
        self.b.store(llir.Constant(I32, 1), self.ptr(offset, span))

    def load(self, offset, span=SCRATCH):
        return self.b.load(self.ptr(offset, span), typ=I32)

    def copy(self, offset, span=RING):
        """cp.async into shared memory, as the pipeline's inline PTX takes it (a 32-bit address)."""
        asm = llir.InlineAsm(llir.FunctionType(llir.VoidType(), [I32]), "cp.async.cg.shared.global [$0], [0], 16;", "r",
                             side_effect=True)
        self.b.call(asm, [self.b.ptrtoint(self.ptr(offset, span), I32)])

    def barriers_left(self):
        drop_unneeded_barriers(self.fn, self.spans)
        return [[is_barrier(i) for i in blk.instructions].count(True) for blk in self.fn.blocks]


def test_a_conversion_keeps_only_its_middle_barrier_before_ring_reads():
    k = _Kernel()
    k.barrier()            # nothing before it: not needed
    k.store(4096)
    k.barrier()            # stores -> loads of the scratch: needed
    k.load(4096)
    k.barrier()            # scratch loads, then ring reads only: not needed
    k.load(0, RING)
    k.b.ret_void()
    assert k.barriers_left() == [1]


def test_the_scratch_written_again_after_its_reads_keeps_the_barrier_between():
    k = _Kernel()
    k.store(4096)
    k.barrier()
    k.load(4100)
    k.barrier()            # reads, then a write to the same scratch: needed
    k.store(4104)
    k.b.ret_void()
    assert k.barriers_left() == [2]


def test_an_access_of_unknown_bytes_conflicts_with_everything():
    k = _Kernel()
    k.load(0, RING)
    k.barrier()
    k.store(8, span=None)
    k.b.ret_void()
    assert k.barriers_left() == [1]


def test_a_user_barrier_stays():
    k = _Kernel()
    k.barrier(user=True)
    k.b.ret_void()
    assert k.barriers_left() == [1]


@pytest.mark.parametrize("copy_in_loop", [True, False])
def test_a_loop_top_barrier_orders_last_iteration_reads_and_this_iterations_copies(copy_in_loop):
    k = _Kernel()
    loop = k.fn.append_basic_block("loop")
    done = k.fn.append_basic_block("done")
    k.b.branch(loop)
    k.b.position_at_end(loop)
    k.barrier()
    if copy_in_loop:
        k.copy(64)         # overwrites the buffer the previous iteration read
    k.load(0, RING)
    k.b.cbranch(llir.Constant(llir.IntType(1), 1), loop, done)
    k.b.position_at_end(done)
    k.b.ret_void()
    assert k.barriers_left() == [0, 1 if copy_in_loop else 0, 0]
