"""Where a JITFunction's source comes from (no compilation): files, exec'd strings, replaced `src`."""
import pytest

from tilejit.errors import CompilationError
from tilejit.runtime.jit import JITFunction, jit


@jit
def file_kernel(x_ptr, n):
    pass


def test_file_kernel_keeps_its_file_and_line():
    assert file_kernel.src.startswith("def file_kernel(")
    assert file_kernel.src_file == __file__
    assert file_kernel.file_name == __file__
    with open(__file__) as f:
        lines = f.read().splitlines()
    assert lines[file_kernel.starting_line_number - 1].startswith("def file_kernel(")


def test_exec_kernel_text_is_found_and_registered():
    import linecache
    text = "x = 1\n\n@jit\ndef made_by_exec(a, b):\n    c = a + b\n"
    namespace = {"jit": jit}
    exec(text, namespace)  # noqa: S102
    kernel = namespace["made_by_exec"]
    assert kernel.src == "def made_by_exec(a, b):\n    c = a + b\n"
    assert kernel.starting_line_number == 4
    assert linecache.getline(kernel.src_file, 5) == "    c = a + b\n"


def _exec_and_forget(name: str, body: str):
    """A function made by exec() whose text no frame holds once this returns."""
    namespace = {}
    exec(f"def {name}(a):\n    {body}\n", namespace)  # noqa: S102
    return namespace[name]


def test_same_name_but_other_text_is_not_taken():
    # A string in a calling frame that defines a function of the same name with other code.
    decoy = "def twin(a):\n    return a * 2\n"  # noqa: F841 - looked at by the source search
    with pytest.raises(CompilationError, match="cannot read the source of kernel 'twin'"):
        JITFunction(_exec_and_forget("twin", "return a + 1"))


def test_function_without_any_source_is_an_error():
    with pytest.raises(CompilationError, match="cannot read the source of kernel 'nowhere'"):
        JITFunction(_exec_and_forget("nowhere", "pass"))


def test_replaced_src_changes_the_cache_key():
    kernel = JITFunction(file_kernel.fn)
    before = kernel.cache_key
    kernel._unsafe_update_src(kernel.src.replace("pass", "n = n + 1"))
    assert kernel.cache_key != before
    assert kernel.hash == kernel.cache_key
    kernel._unsafe_update_src(file_kernel.src)  # the original text: the original file again
    assert kernel.cache_key == before
    assert kernel.src_file == __file__
    kernel.hash = None  # Triton's way to force the key to be computed again
    assert kernel.cache_key == before


MODULE_LEVEL_TEXT = "def kept_in_a_global(a):\n    b = a * 3\n"


def test_exec_of_a_module_level_string_inside_a_function():
    namespace = {}
    exec(MODULE_LEVEL_TEXT, namespace)  # noqa: S102 - the text is only held by this module's globals
    kernel = JITFunction(namespace["kept_in_a_global"])
    assert kernel.src == MODULE_LEVEL_TEXT
