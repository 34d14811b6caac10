"""Properties of `--fix --unsafe-fixes`: its output always parses, and fixing again changes nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchrepro_lint.config import Config
from torchrepro_lint.fixes.runner import fix_sources

NAMES = st.sampled_from(["alpha", "beta_2", "seed_value", "x", "cfg_seed", "rank"])

# Statements that trigger fixes, or sit next to them; {n} is a generated identifier.
SNIPPETS = [
    "torch.backends.cudnn.benchmark = True",
    "torch.backends.cudnn.deterministic = True",
    "torch.backends.cudnn.determinstic = True",
    "torch.backends.cudnn.benchmark == False",
    "torch.use_deterministic_algorithms = True",
    "torch.cuda.manual_seed_all({n})",
    "torch.manual_seed({n})",
    "{n} = torch.randn(3)",
    "{n} = random.random()",
    "{n} = np.random.rand(2)",
    "model_{n} = nn.Linear(3, 3).cuda()",
    "os.environ['PYTHONHASHSEED'] = str({n})",
    "pass",
    "# a comment about {n}",
    # TRP304's, TRP302's and TRP105's fixes: a named sampler, its loader and an epoch loop; a
    # split; a draw, then a seed
    "smp = DistributedSampler([{n}])\nloader = DataLoader([], sampler=smp)\nfor epoch in range(3):\n    for b in loader:\n        print(b)",
    "part = random_split([], [0.5, 0.5])",
    "w_{n} = torch.randn(2)\ntorch.manual_seed(7)",
]


@st.composite
def programs(draw):
    header = "import os\nimport random\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"
    header += "from torch.utils.data import DataLoader, DistributedSampler, random_split\n\n"
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        snippet = draw(st.sampled_from(SNIPPETS)).format(n=draw(NAMES))
        if draw(st.booleans()) and not snippet.startswith("#"):
            lines.append(f"if {draw(NAMES)}:\n" + "".join(f"    {line}\n" for line in snippet.split("\n")).rstrip("\n"))
        else:
            lines.append(snippet)
    body = "\n".join([*lines, "pass"])  # never a block of comments only
    functions = ""
    if draw(st.booleans()):
        functions = "def helper(seed):\n" + "".join(f"    {line}\n" for line in body.splitlines()) + "\n"
    guard = "if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in body.splitlines())
    if functions:
        guard += "    helper(3)\n"
    trailing_newline = draw(st.booleans())
    text = header + functions + guard
    return text if trailing_newline else text.rstrip("\n")


def fix_twice(text: str, tmp: Path):
    path = tmp / "prog.py"
    config = Config(root=tmp, torch_version=(2, 9))
    first = fix_sources({path: text}, config, unsafe=True).fixed.get(path, text)
    second = fix_sources({path: first}, config, unsafe=True).fixed.get(path, first)
    return first, second


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(programs())
def test_fixed_programs_parse_and_fixing_is_idempotent(tmp_path, text):
    ast.parse(text)  # the generator makes valid programs only
    first, second = fix_twice(text, tmp_path)
    ast.parse(first)
    assert second == first


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_grammar())
def test_arbitrary_valid_code_never_crashes_and_stays_valid(tmp_path, text):
    path = tmp_path / "gen.py"
    outcome = fix_sources({path: text}, Config(root=tmp_path), unsafe=True)
    assert outcome.result.errors == []
    ast.parse(outcome.fixed.get(path, text))
