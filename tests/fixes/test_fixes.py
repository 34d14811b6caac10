"""Autofix: each fix from hazard to expected source, re-lint clean, idempotent, never corrupting."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest

from conftest import write_project
from torchrepro_lint.cli import main
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.runner import fix_sources


def fixed(tmp_path: Path, files: dict[str, str], unsafe: bool = False, config: dict | None = None) -> dict[str, str]:
    write_project(tmp_path, files, config)
    sources = {tmp_path / name: text for name, text in files.items()}
    outcome = fix_sources(sources, load_config([tmp_path]), unsafe)
    return {p.relative_to(tmp_path).as_posix(): t for p, t in outcome.fixed.items()}, outcome


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- one test per fix: identifiers differ from any template's --------------------------------
CASES = {
    "TRP201": (
        {"run.py": dedent('''
            import torch.backends.cudnn as cdn

            if __name__ == "__main__":
                cdn.deterministic = True
                cdn.benchmark = True  # keep this comment
            ''')},
        {"run.py": dedent('''
            import torch.backends.cudnn as cdn

            if __name__ == "__main__":
                cdn.deterministic = True
                cdn.benchmark = False  # keep this comment
            ''')},
        False,
    ),
    "TRP206": (
        {"cfg.py": dedent('''
            import torch as th

            th.backends.cudnn.determinstic = True
            th.use_deterministic_algorithms = True
            th.backends.cudnn.benchmark == False
            ''')},
        {"cfg.py": dedent('''
            import torch as th

            th.backends.cudnn.deterministic = True
            th.use_deterministic_algorithms(True)
            th.backends.cudnn.benchmark = False
            ''')},
        False,
    ),
    "TRP106": (
        {"go.py": dedent('''
            import torch as tt

            if __name__ == "__main__":
                tt.cuda.manual_seed_all(2024)
                weights = tt.rand(5)
            ''')},
        {"go.py": dedent('''
            import torch as tt

            if __name__ == "__main__":
                tt.manual_seed(2024)
                weights = tt.rand(5)
            ''')},
        False,
    ),
    "TRP102": (
        {"job.py": dedent('''
            import torch
            import numpy as numeric

            def run(cfg):
                torch.manual_seed(cfg.base_seed)
                return numeric.random.permutation(10)

            if __name__ == "__main__":
                run(None)
            ''')},
        {"job.py": dedent('''
            import torch
            import numpy as numeric

            def run(cfg):
                torch.manual_seed(cfg.base_seed)
                numeric.random.seed(cfg.base_seed)
                return numeric.random.permutation(10)

            if __name__ == "__main__":
                run(None)
            ''')},
        False,
    ),
    "TRP203": (
        {"entry.py": dedent('''
            """Entry."""
            import torch

            if __name__ == "__main__":
                torch.use_deterministic_algorithms(True)
            ''')},
        {"entry.py": dedent('''
            """Entry."""
            import torch
            import os
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

            if __name__ == "__main__":
                torch.use_deterministic_algorithms(True)
            ''')},
        False,
    ),
}
UNSAFE_CASES = {
    "TRP101": (
        {"sample.py": dedent('''
            import random
            import torch

            if __name__ == "__main__":
                pick = random.choice([1, 2])
                print(torch.randn(pick))
            ''')},
        {"sample.py": dedent('''
            import random
            import torch

            if __name__ == "__main__":
                torch.manual_seed(77)
                random.seed(77)
                pick = random.choice([1, 2])
                print(torch.randn(pick))
            ''')},
        True,
    ),
    "TRP202": (
        {"det.py": dedent('''
            from torch.backends import cudnn

            def configure():
                cudnn.deterministic = True

            if __name__ == "__main__":
                configure()
            ''')},
        {"det.py": dedent('''
            from torch.backends import cudnn
            import torch

            def configure():
                cudnn.deterministic = True
                torch.use_deterministic_algorithms(True)

            if __name__ == "__main__":
                configure()
            ''')},
        True,
    ),
    "TRP205": (
        {"gpu.py": dedent('''
            import torch

            if __name__ == "__main__":
                torch.manual_seed(5)
                net = torch.nn.Linear(2, 2).cuda()
            ''')},
        {"gpu.py": dedent('''
            import torch

            if __name__ == "__main__":
                torch.manual_seed(5)
                torch.use_deterministic_algorithms(True)
                net = torch.nn.Linear(2, 2).cuda()
            ''')},
        True,
    ),
}


@pytest.mark.parametrize("code", sorted({**CASES, **UNSAFE_CASES}))
def test_fix_gives_expected_source_and_converges(tmp_path, code):
    before, after, unsafe = {**CASES, **UNSAFE_CASES}[code]
    config = {"select": [code], "seed": 77, "torch-version": "2.9"}
    result, outcome = fixed(tmp_path, before, unsafe, config)
    assert result == after
    assert not [f for f in outcome.result.findings if f.code == code]  # re-lints clean for that code
    again, _ = fixed(tmp_path, after, unsafe, config)
    assert again == {}  # a second --fix changes nothing


@pytest.mark.parametrize("code", sorted(UNSAFE_CASES))
def test_unsafe_fixes_need_the_flag(tmp_path, code):
    before, _, _ = UNSAFE_CASES[code]
    result, outcome = fixed(tmp_path, before, False, {"select": [code]})
    assert result == {} and [f.code for f in outcome.result.findings] == [code]


def test_two_fixes_needing_one_import_add_it_once(tmp_path):
    files = {"m.py": dedent('''
        import torch.backends.cudnn as cudnn

        def a():
            cudnn.deterministic = True

        def b():
            cudnn.deterministic = True

        if __name__ == "__main__":
            a()
            b()
        ''')}
    result, _ = fixed(tmp_path, files, True, {"select": ["TRP202"]})
    assert result["m.py"].count("import torch\n") == 1
    assert result["m.py"].count("torch.use_deterministic_algorithms(True)") == 2


# -- the command line: --diff, --fix, atomic writes, stdin -----------------------------------
HAZARD = "import torch\n\nif __name__ == '__main__':\n    torch.backends.cudnn.deterministic = True\n    torch.backends.cudnn.benchmark = True\n"


def test_diff_writes_nothing_and_exits_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"t.py": HAZARD})
    target = tmp_path / "t.py"
    os.utime(target, (1_000_000_000, 1_000_000_000))
    assert main(["check", "--diff", "."]) == 1
    out = capsys.readouterr().out
    assert "-    torch.backends.cudnn.benchmark = True\n+    torch.backends.cudnn.benchmark = False" in out
    assert target.read_text() == HAZARD and target.stat().st_mtime == 1_000_000_000


def test_fix_writes_atomically_keeping_mode_and_reports_the_rest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"t.py": HAZARD})
    target = tmp_path / "t.py"
    target.chmod(0o750)
    code = main(["check", "--fix", "--show-fixes", "."])
    out = capsys.readouterr().out
    assert "benchmark = False" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert "fixed t.py:5:5: TRP201" in out
    assert code == 1 and "TRP202" in out  # the unsafe one remains, reported
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".t.py")] == []  # no temp file left


def test_fix_only_exits_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"t.py": HAZARD})
    assert main(["check", "--fix-only", "."]) == 0
    assert "TRP202" not in capsys.readouterr().out


def test_a_file_that_does_not_parse_is_never_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    broken = HAZARD + "def oops(:\n"
    write_project(tmp_path, {"t.py": broken})
    main(["check", "--fix", "--unsafe-fixes", "."])
    assert (tmp_path / "t.py").read_text() == broken


def test_stdin_fix_prints_the_fixed_buffer(tmp_path, monkeypatch, capsys):
    import io
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(HAZARD.encode())))
    assert main(["check", "--fix", "--stdin-filename", "buf.py", "-"]) == 0
    assert capsys.readouterr().out == HAZARD.replace("benchmark = True", "benchmark = False")


def test_encoding_and_newlines_are_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    source = "# -*- coding: latin-1 -*-\r\nimport torch\r\nname = '\xe9'\r\nif __name__ == '__main__':\r\n    torch.backends.cudnn.deterministic = True\r\n    torch.backends.cudnn.benchmark = True\r\n"
    write_project(tmp_path, {})
    (tmp_path / "t.py").write_bytes(source.encode("latin-1"))
    main(["check", "--fix", "."])
    assert (tmp_path / "t.py").read_bytes() == source.replace("benchmark = True", "benchmark = False").encode("latin-1")


# -- fixes of the data-loading, memory and ordering rules -------------------------------------
DATA_CASES = {
    "TRP501": (
        {"layer.py": dedent('''
            import torch

            def scores(n_items):
                buf = torch.empty(n_items, 4)
                return buf.sum()
            ''')},
        {"layer.py": dedent('''
            import torch

            def scores(n_items):
                buf = torch.zeros(n_items, 4)
                return buf.sum()
            ''')},
        False,
    ),
    "TRP601": (
        {"ds.py": dedent('''
            import glob
            import os

            class Frames:
                def __init__(self, folder):
                    self.paths = os.listdir(folder)
                    self.first = next(glob.iglob(folder + "/*.png"))

                def __getitem__(self, k):
                    return self.paths[k]
            ''')},
        {"ds.py": dedent('''
            import glob
            import os

            class Frames:
                def __init__(self, folder):
                    self.paths = sorted(os.listdir(folder))
                    self.first = next(iter(sorted(glob.iglob(folder + "/*.png"))))

                def __getitem__(self, k):
                    return self.paths[k]
            ''')},
        False,
    ),
    "TRP603": (
        {"opt.py": dedent('''
            import torch

            def make_opt(enc, dec):
                return torch.optim.Adam(set(enc.parameters()) | set(dec.parameters()), lr=3e-4)
            ''')},
        {"opt.py": dedent('''
            import torch

            def make_opt(enc, dec):
                return torch.optim.Adam(list(dict.fromkeys([*enc.parameters(), *dec.parameters()])), lr=3e-4)
            ''')},
        False,
    ),
}
DATA_UNSAFE = {
    "TRP602": (
        {"vocab.py": dedent('''
            def build(tokens: list[str]):
                names = [str(t) for t in tokens]
                return {w: i for i, w in enumerate(set(names))}
            ''')},
        {"vocab.py": dedent('''
            def build(tokens: list[str]):
                names = [str(t) for t in tokens]
                return {w: i for i, w in enumerate(sorted(set(names)))}
            ''')},
        True,
    ),
}


@pytest.mark.parametrize("code", sorted({**DATA_CASES, **DATA_UNSAFE}))
def test_data_rule_fixes(tmp_path, code):
    before, after, unsafe = {**DATA_CASES, **DATA_UNSAFE}[code]
    config = {"select": [code]}
    result, outcome = fixed(tmp_path, before, unsafe, config)
    assert result == after
    assert not [f for f in outcome.result.findings if f.code == code]
    assert fixed(tmp_path, after, unsafe, config)[0] == {}


def test_params_fix_rewrites_a_list_of_a_set_whole(tmp_path):
    """`list(set(x))` handed to an optimizer becomes `list(dict.fromkeys(x))`, not a list of a list."""
    files = {"opt.py": dedent('''
        import torch

        def make_opt(model):
            return torch.optim.SGD(list(set(model.parameters())), lr=0.1)
        ''')}
    expected = files["opt.py"].replace("list(set(model.parameters()))", "list(dict.fromkeys(model.parameters()))")
    result, outcome = fixed(tmp_path, files, False, {"select": ["TRP603"]})
    assert result == {"opt.py": expected}
    assert not [f for f in outcome.result.findings if f.code == "TRP603"]


def test_dataloader_fix_adds_the_seed_worker_helper_once(tmp_path):
    source = dedent('''
        import torch
        from torch.utils.data import DataLoader

        def loaders(train_set, val_set, jobs):
            fit = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=jobs)
            check = DataLoader(val_set, batch_size=8, num_workers=jobs,)
            return fit, check
        ''')
    result, outcome = fixed(tmp_path, {"loaders.py": source}, True, {"select": ["TRP301"], "seed": 11})
    text = result["loaders.py"]
    assert text.count("def seed_worker(worker_id):") == 1
    assert text.count("import numpy as np") == 1 and text.count("import random") == 1
    assert text.count("generator=torch.Generator().manual_seed(11), worker_init_fn=seed_worker") == 2
    assert not [f for f in outcome.result.findings if f.code == "TRP301"]
    assert fixed(tmp_path, {"loaders.py": text}, True, {"select": ["TRP301"], "seed": 11})[0] == {}


def test_eval_dropout_fixes_use_the_methods_own_self(tmp_path):
    source = dedent('''
        import torch.nn as nn
        import torch.nn.functional as F

        class Block(nn.Module):
            def forward(me, h, q, k, v):
                h = F.dropout(h, 0.1)
                return F.scaled_dot_product_attention(q, k, v, dropout_p=me.p_attn)
        ''')
    result, outcome = fixed(tmp_path, {"block.py": source}, False, {"select": ["TRP403"]})
    text = result["block.py"]
    assert "F.dropout(h, 0.1, training=me.training)" in text
    assert "dropout_p=me.p_attn if me.training else 0.0" in text
    assert not [f for f in outcome.result.findings if f.code == "TRP403"]
