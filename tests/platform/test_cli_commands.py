import warnings

import pytest

from tilejit.cli import CLIError, main, parse_signature
from tilejit.runtime.cache import FileCacheManager

NAMES = ["x_ptr", "y_ptr", "n", "BLOCK"]


def test_backends_lists_installed_broken_and_missing(standard_fakes, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "fakegpu: active" in out and "current target: fakegpu:7:16" in out
    assert "fake-assembler: found at /nowhere/fakeas (1.0)" in out
    assert "fakecpu: active" in out
    assert "missingmod: BROKEN: import of 'tilejit_no_such_module_xyz:Backend' failed" in out
    assert "future: BROKEN" in out
    assert "cuda: not installed (`pip install tilejit[nvidia]`)" in out


def test_cache_commands(capsys, tmp_path):
    assert main(["cache", "list"]) == 0
    assert "cache is empty" in capsys.readouterr().out
    FileCacheManager("abc123").store({"name": "add_kernel", "target": "cuda:90"}, {"ptx": "// ptx\n"})
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "abc123" in out and "add_kernel" in out and "cuda:90" in out and "ptx" in out
    assert main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert "entries:        1" in out and str(tmp_path / "cache") in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 cache entry" in capsys.readouterr().out
    assert main(["cache", "stats", "--cache-dir", str(tmp_path / "other")]) == 0
    assert "entries:        0" in capsys.readouterr().out


def test_compile_errors_are_clean(capsys, tmp_path):
    assert main(["compile", str(tmp_path / "nope.py:add"), "-s", "i32", "-t", "cuda:90", "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilejit: error: no such file") and "Traceback" not in err
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('bad user module')\n")
    assert main(["compile", f"{broken}:add", "-s", "i32", "-t", "cuda:90", "-o", str(tmp_path)]) == 1
    assert "importing" in capsys.readouterr().err
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert main(["compile", f"{empty}:add", "-s", "i32", "-t", "cuda:90", "-o", str(tmp_path)]) == 1
    assert "has no @jit kernel named 'add'" in capsys.readouterr().err


def test_bad_target_is_a_clean_error(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["compile", "examples/none.py:k", "-s", "i32", "-t", "cuda:big", "-o", "/tmp/x"])
    assert code == 1 and "Traceback" not in capsys.readouterr().err


def test_parse_signature_positional_like_triton_aot():
    signature, constexprs, attrs = parse_signature("*fp32:16, *fp32, i32:1, 1024", NAMES)
    assert signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "constexpr", "BLOCK": "constexpr"}
    assert constexprs == {"n": 1, "BLOCK": 1024}
    assert attrs == {(0,): [["tt.divisibility", 16]]}


def test_parse_signature_by_name():
    signature, constexprs, attrs = parse_signature("BLOCK=256,n=i32:16,y_ptr=*fp16,x_ptr=*fp16", NAMES)
    assert signature == {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"}
    assert constexprs == {"BLOCK": 256} and attrs == {(2,): [["tt.divisibility", 16]]}


@pytest.mark.parametrize("text, message", [
    ("*fp32,*fp32,i32", "no type for parameter"),
    ("*fp32,*fp32,i32,8,9", "has 5 items"),
    ("x_ptr=*fp32,x_ptr=*fp32,n=i32,BLOCK=4", "twice"),
    ("z=*fp32,y_ptr=*fp32,n=i32,BLOCK=4", "not a parameter"),
    ("*fp32:8,*fp32,i32,4", "unknown hint"),
])
def test_parse_signature_errors(text, message):
    with pytest.raises(CLIError, match=message):
        parse_signature(text, NAMES)
