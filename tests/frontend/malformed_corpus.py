"""A generated corpus of malformed and unusual kernels: mutations of one valid kernel.

Each case is a kernel body fragment placed into the same template; `build_corpus()` writes every
kernel into one real Python module (so `@jit` can read the source and errors can name a real file
and line) and returns `(case name, kernel, first line, last line of the fragment)`.
"""
import importlib.util
import os
import tempfile
import textwrap
import warnings

# The template: `p`, `q` float pointers, `n` a runtime int, `BLOCK` = 16; `x` a 1-D tensor, `x2` a
# 16x16 tensor, `flag` a scalar i1, `r` a scalar fp32 tensor. The fragment goes where FRAGMENT is.
TEMPLATE = '''
@jit
def {name}(p, q, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(p + offs)
    x2 = tl.load(p + offs[:, None] * BLOCK + offs[None, :])
    flag = n > 0
    r = tl.sum(x, axis=0)
{fragment}
    tl.store(q + offs, x)
'''
FRAGMENT_OFFSET = 8  # the fragment's first line, counted from the `@jit` line (line 1 of TEMPLATE's text)

SIGNATURE = {"p": "*fp32", "q": "*fp32", "n": "i32"}
CONSTEXPRS = {"BLOCK": 16}

# Values of the wrong kind, put into every argument of the main builtins.
BAD_VALUES = ["None", "1.5", "'text'", "(1, 2)", "x", "n", "tl.float32", "-1", "[0, 0, 0]", "tl.load", "x2"]

# One argument replaced by `{}`; every call is also tried with each bad value there.
BUILTIN_SLOTS = [
    "tl.load({})", "tl.load(p + offs, mask={})", "tl.load(p + offs, other={})",
    "tl.load(p + offs, cache_modifier={})", "tl.load(p + offs, eviction_policy={})",
    "tl.load(p + offs, boundary_check={})", "tl.load(p + offs, padding_option={})",
    "tl.store({}, x)", "tl.store(q + offs, {})", "tl.store(q + offs, x, mask={})",
    "tl.arange({}, 16)", "tl.arange(0, {})",
    "tl.full({}, 1.0, tl.float32)", "tl.full([16], {}, tl.float32)", "tl.full([16], 1.0, {})",
    "tl.zeros({}, tl.float32)", "tl.zeros([16], {})",
    "tl.reshape(x, {})", "tl.reshape({}, [4, 4])",
    "tl.dot({}, x2)", "tl.dot(x2, {})", "tl.dot(x2, x2, acc={})", "tl.dot(x2, x2, input_precision={})",
    "tl.sum(x, axis={})", "tl.max(x2, axis={})", "tl.reduce(x, {}, tl.maximum)", "tl.reduce(x, 0, {})",
    "tl.where({}, x, x)", "tl.where(x > 0, {}, x)",
    "tl.atomic_add({}, x)", "tl.atomic_add(q + offs, {})", "tl.atomic_add(q + offs, x, sem={})",
    "tl.atomic_max(q + offs, x, scope={})", "tl.atomic_cas(q + offs, {}, x)", "tl.atomic_xchg(q + offs, {})",
    "tl.make_block_ptr({}, shape=[n], strides=[1], offsets=[0], block_shape=[16], order=[0])",
    "tl.make_block_ptr(p, shape={}, strides=[1], offsets=[0], block_shape=[16], order=[0])",
    "tl.make_block_ptr(p, shape=[n], strides={}, offsets=[0], block_shape=[16], order=[0])",
    "tl.make_block_ptr(p, shape=[n], strides=[1], offsets={}, block_shape=[16], order=[0])",
    "tl.make_block_ptr(p, shape=[n], strides=[1], offsets=[0], block_shape={}, order=[0])",
    "tl.make_block_ptr(p, shape=[n], strides=[1], offsets=[0], block_shape=[16], order={})",
    "tl.program_id({})", "tl.num_programs({})", "tl.broadcast_to(x, {})", "tl.expand_dims(x, {})",
    "tl.permute(x2, {})", "tl.trans(x2, {})", "x.to({})", "tl.cast(x, {})", "tl.exp({})",
    "tl.maximum(x, {})", "tl.cumsum(x, {})", "tl.split({})", "tl.join(x, {})", "tl.histogram(x, {})",
    "tl.multiple_of(offs, {})", "tl.device_assert({})", "tl.static_assert({})", "tl.rand({}, offs)",
    "tl.clamp(x, {}, 1.0)", "tl.sort(x, {})", "tl.gather(x, {}, 0)", "tl.fma(x, x, {})", "tl.umulhi(offs, {})",
    "tl.cdiv({}, 4)", "tl.flip(x, {})", "tl.argmax(x, {})", "tl.cat(x, {})", "tl.view(x, {})",
    "tl.advance({}, [0])", "tl.static_range({})", "tl.div_rn(x, {})", "tl.interleave(x, {})",
]

# Calls with the wrong number of arguments or unknown keywords.
ARITY_AND_KEYWORDS = [
    "tl.load()", "tl.load(p + offs, None, 0.0, (), '', '', '', False, 1, 2)", "tl.store(q + offs)",
    "tl.arange(0)", "tl.arange(0, 16, 2)", "tl.full([16])", "tl.zeros()", "tl.dot(x2)", "tl.where(flag, x)",
    "tl.atomic_add(q + offs)", "tl.program_id()", "tl.program_id(0, 1)", "tl.sum()", "tl.reshape()",
    "tl.make_block_ptr(p)", "tl.exp(x, x)", "tl.maximum(x)", "tl.cast(x)", "tl.reduce(x)", "x.to()",
    "tl.load(p + offs, bogus=1)", "tl.store(q + offs, x, msk=x > 0)", "tl.arange(start=0, stop=16)",
    "tl.sum(x, dim=0)", "tl.dot(x2, x2, accumulator=x2)", "tl.full([16], 1.0, tl.float32, device='cuda')",
    "tl.program_id(dim=0)", "tl.where(cond=flag, x=x, y=x)", "tl.exp(x=x)", "x.to(tl.float16, round='rtne')",
    "tl.zeros([16], dtype=tl.float32, other=1)", "tl.atomic_add(q + offs, x, semantic='relaxed')",
]

# Everything else the brief lists: wrong objects, scalars, tensors called, constexpr misuse, shadowing,
# unsupported statements, huge and empty shapes, type changes in control flow.
MISCELLANEOUS = [
    # attribute access on the wrong objects
    "n.foo", "x.shape.foo", "tl.nothing_here", "BLOCK.foo", "x.dtype.foo", "offs.T.T.bogus", "tl.float32.bar",
    "x.shape[5]", "(1, 2).x", "flag.dtype.primitive_bitwidth.real.foo", "p.dtype.element_ty.nope",
    "tl.math.nothing", "x.sum.foo", "helper_ok.bad_attribute", "q.store(x)",
    # subscripts of scalars, odd subscripts
    "n[0]", "BLOCK[0]", "r[0]", "x[0]", "x[None, None, :, 0]", "x[n]", "x[::2]", "x[1:3]", "x['a']",
    "x2[0, 0, 0]", "(1, 2)[5]", "(1, 2)[n]", "(1, 2)['a']", "x[...]", "x[None, ...]", "tl.float32[0]",
    # calling things that are not callable
    "x(1)", "n()", "BLOCK()", "r()", "(1, 2)()", "tl.float32(1)", "x.shape()", "'text'()",
    # constexpr misuse
    "BLOCK = x", "tl.constexpr(x)", "tl.arange(0, n)", "tl.arange(0, BLOCK + n)", "tl.zeros([n], tl.float32)",
    "tl.static_assert(n > 0)", "tl.static_assert(False, 'custom message')",
    "for i in tl.static_range(n):\n    x = x + 1",
    "for i in tl.static_range(BLOCK, 0):\n    x = x + 1",
    "y = tl.constexpr(1) + x",
    # shadowing builtins and names
    "tl = 3\nx = tl.load(p)", "range = 5\nfor i in range(3):\n    x = x + 1", "len = x\ny = len(x)",
    "min = 2\nx = x + min", "int = x\ny = int(3)", "print = 4\nprint(x)",
    # recursion and calls
    "x = recursive(x, 3)", "x = helper_ok(x, x, x)", "x = helper_ok()", "x = helper_ok(y=x)",
    "x = helper_returns_tuple(x)[7]", "x = not_a_jit_function(x)", "x = helper_mismatched_return(x, n)",
    "x = helper_ok(x, x)(x)",
    # unsupported statements
    "with open('f') as f:\n    x = x", "try:\n    x = x\nexcept Exception:\n    x = x", "del x\nx = offs",
    "global GLOBAL_NAME", "x = lambda y: y", "x = [i for i in range(3)]", "assert n > 0, 'n positive'",
    "raise ValueError('no')", "import os", "class C:\n    pass", "x = {1: 2}", "x = {1, 2}",
    "x = (yield)", "for i in range(3):\n    break", "while flag:\n    continue", "x = (y := 3)",
    "async def f():\n    pass", "x = *x,", "x @= x2", "def inner():\n    return 1",
    # very large and zero-size shapes
    "y = tl.zeros([2**20, 2**20], tl.float32)", "y = tl.arange(0, 2**31)", "y = tl.full([2**40], 0, tl.int32)",
    "y = tl.zeros([0], tl.float32)", "y = tl.arange(0, 0)", "y = tl.full([], 1, tl.int32)",
    "y = tl.reshape(x, [0, 16])", "y = tl.zeros([16, 0], tl.float32)", "y = tl.broadcast_to(x, [2**30, 16])",
    "y = tl.zeros([-4], tl.float32)", "y = tl.arange(16, 0)", "y = x[:, None] + tl.zeros([1, 2**25], tl.float32)",
    # dtype and shape changes through control flow
    "if flag:\n    x = n\nelse:\n    x = 1.5", "if flag:\n    x = x2", "if flag:\n    x = x.to(tl.float16)",
    "for i in range(n):\n    x = x.to(tl.int32)", "while flag:\n    x = x2\n    flag = False",
    "if flag:\n    y = x\ntl.store(q, y)", "for i in range(n):\n    z = i\nx = x + z",
    "if flag:\n    return x", "for i in range(n):\n    return", "if x:\n    x = x + 1",
    "while x > 0:\n    x = x - 1", "for i in range(x):\n    x = x + 1", "for i in x:\n    x = x + 1",
    "if flag:\n    x = (x, x)", "for i in range(1.5):\n    x = x + 1", "for i in range(0, n, 0):\n    x = x + 1",
    # odd but legal-looking operations
    "x = x / 0", "x = n // 0", "x = BLOCK // 0", "x = x ** n", "x = 'a' + x", "x = x + None", "x = x < 'a'",
    "x = -tl.float32", "x = not x", "x = x and x", "x = x if x else x", "x = p * 2", "x = p + 1.5",
    "x = p + q", "x = flag + p", "x = x @ x", "x = x2 @ x2", "x = offs << -1", "x = 1 << 200", "x = x in (1, 2)",
    "x = x is None", "x = ~x", "x = x % 0.0", "x = tl.load(p + x)", "x = tl.load(x)",
]

PRELUDE = '''
import tilejit.language as tl
from tilejit.runtime.jit import jit

GLOBAL_NAME = 1


def not_a_jit_function(v):
    return v


@jit
def helper_ok(a, b):
    return a + b


@jit
def helper_returns_tuple(a):
    return a, a


@jit
def helper_mismatched_return(a, n):
    if n > 0:
        return a
    return 1


@jit
def recursive(a, depth):
    return recursive(a, depth - 1)
'''


def _cases():
    for template in BUILTIN_SLOTS:
        for bad in BAD_VALUES:
            yield f"{template.format('{}')} <- {bad}", f"y = {template.format(bad)}"
    for call in ARITY_AND_KEYWORDS:
        yield call, f"y = {call}"
    for fragment in MISCELLANEOUS:
        yield fragment, fragment


def build_corpus(directory=None):
    """Write every mutation into one module and import it: [(case, kernel, first line, last line)]."""
    directory = directory or tempfile.mkdtemp(prefix="tilejit_corpus_")
    parts, spans, line = [PRELUDE], [], PRELUDE.count("\n") + 1
    for i, (case, fragment) in enumerate(_cases()):
        name = f"mutant_{i}"
        body = textwrap.indent(fragment, "    ")
        text = TEMPLATE.format(name=name, fragment=body)
        first = line + FRAGMENT_OFFSET  # TEMPLATE starts with a newline: `@jit` is its line 2
        spans.append((case, name, first, first + fragment.count("\n")))
        parts.append(text)
        line += text.count("\n")
    path = os.path.join(directory, "tilejit_malformed_kernels.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(parts))
    spec = importlib.util.spec_from_file_location("tilejit_malformed_kernels", path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # `(1, 2)()` and friends are meant: no SyntaxWarning noise
        warnings.simplefilter("ignore", SyntaxWarning)
        spec.loader.exec_module(module)
    return path, [(case, getattr(module, name), first, last) for case, name, first, last in spans]
