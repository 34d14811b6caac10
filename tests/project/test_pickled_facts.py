"""How program facts are pickled (cache.dumps_with_modules): a ProjectModule as its path, mapped
back to this run's module; a path as its text, one string."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from torchrepro_lint.pipeline.cache import dumps_with_modules, loads_with_modules
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.interpreter.states import Facts


def _module(path: Path) -> ProjectModule:
    """A ProjectModule with only its path: all that pickling reads of it."""
    module = ProjectModule.__new__(ProjectModule)
    module.path = path
    return module


def test_paths_round_trip_as_one_string_each():
    paths = {Path("/project/timm/models/resnet.py"), Path("relative/train.py")}
    data = dumps_with_modules({"modules": paths, "pair": (Path("/project/a.py"), 3)})
    assert loads_with_modules(data, {}) == {"modules": paths, "pair": (Path("/project/a.py"), 3)}
    assert b"/project/timm/models/resnet.py" in data  # the text, not pathlib's parts
    assert b"resnet.py" not in data.replace(b"/project/timm/models/resnet.py", b"")


def test_equal_facts_give_equal_bytes():
    first = dumps_with_modules([Path("/p/x.py"), Path("/p/y.py")])
    again = dumps_with_modules([Path("/p/" + "x.py"), Path("/p/y.py")])
    assert first == again


def test_a_module_is_the_run_s_module_at_its_path():
    old, new = _module(Path("/p/m.py")), _module(Path("/p/m.py"))
    data = dumps_with_modules((old, Path("/p/m.py")))
    used: list = []
    loaded = loads_with_modules(data, {Path("/p/m.py"): new}, used)
    assert loaded[0] is new and loaded[1] == Path("/p/m.py")
    assert used == [(Path("/p/m.py"), new)]
    with pytest.raises(KeyError):
        loads_with_modules(data, {})


def test_plain_pickle_still_reads_the_bytes():
    assert pickle.loads(dumps_with_modules(Path("/p/z.py"))) == Path("/p/z.py")


def test_the_modules_of_facts_are_one_sorted_text():
    paths = {Path(f"/project/m{i}.py") for i in range(40)}
    facts = Facts(modules=paths, functions={(Path("/project/m1.py"), "main")}, truncated=True)
    data = dumps_with_modules([facts, Facts()])
    assert loads_with_modules(data, {}) == [facts, Facts()]
    assert b"/project/m0.py\x00/project/m1.py\x00/project/m10.py" in data  # sorted, one string
    again = Facts(modules={Path(f"/project/m{i}.py") for i in reversed(range(40))}, functions=set(facts.functions), truncated=True)
    assert dumps_with_modules([again, Facts()]) == data  # equal facts, equal bytes
    fewer = Facts(modules=paths - {Path("/project/m0.py")})
    assert loads_with_modules(dumps_with_modules(fewer), {}) == fewer



def test_unpickled_paths_are_shared_between_loads():
    # The language server unpickles the facts of every program an edit left valid, on every
    # edit: each path text gives one Path object, whose hash is computed once.
    facts = Facts(modules={Path("/project/a.py"), Path("/project/b.py")}, functions={(Path("/project/a.py"), "main")})
    data = dumps_with_modules(facts)
    first, again = loads_with_modules(data, {}), loads_with_modules(data, {})
    assert first == again == facts
    by_text = {str(p): p for p in first.modules}
    assert all(by_text[str(p)] is p for p in again.modules)
    (path, _), = again.functions
    assert path is by_text["/project/a.py"]
