"""Models built where their init draws nothing from torch's generator (TRP105's late seed).

On the meta device (`with torch.device("meta")`, `device="meta"`) no tensor has data and no
random fill draws: torch 2.13 gives the same `torch.rand(1)` after a seed whether or not an
`nn.Linear` was built there in between. The empty-init contexts spare less (read in their
sources): Lightning's `_EmptyInit` turns only the `torch.nn.init` functions that dispatch to
`__torch_function__` into no-ops (uniform_, normal_, kaiming_uniform_: Linear, Embedding, Conv;
not MultiheadAttention's xavier_uniform_); transformers' `no_init_weights()` every
`torch.nn.init` function; accelerate's `init_empty_weights()` moves each parameter to the meta
device as it is registered, so a value drawn before that (`nn.Parameter(torch.randn(n))`) was
drawn. And processes that load a checkpoint in turns (`for rank in range(world_size): if
global_rank == rank:`) all load it.
"""

from __future__ import annotations

import pytest
from conftest import reported

LATE = {"select": ["TRP105"]}

NET = (
    "import torch\nimport torch.nn as nn\n\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(8, 8)\n"
    "        self.embed = nn.Embedding(16, 8)\n"
)


def program(build: str, after: str = "", head: str = "") -> str:
    """A script that builds a model (`build`, indented into main), then seeds torch."""
    body = "".join(f"    {line}\n" for line in build.splitlines())
    tail = "".join(f"    {line}\n" for line in after.splitlines())
    return (
        NET + head + "\n\ndef main():\n" + body + tail + "    torch.manual_seed(0)\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    )


def seed_row(source: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if "torch.manual_seed(0)" in line)


def late(lint, source: str, files: dict | None = None) -> set:
    return reported(lint({"train.py": source, **(files or {})}, LATE), lint.root)


SPARED = [
    ("the meta device", 'with torch.device("meta"):\n    model = Net()'),
    ("the meta device by keyword", 'with torch.device(type="meta"):\n    model = Net()'),
    ("a device held in a variable", 'meta = torch.device("meta")\nwith meta:\n    model = Net()'),
    ("the device's name in a variable", 'where = "meta"\nwith torch.device(where):\n    model = Net()'),
    ("among other contexts", 'with torch.no_grad(), torch.device("meta"):\n    model = Net()'),
    ("a layer given device='meta'", 'layer = nn.Linear(4, 4, device="meta")'),
    ("a random factory given device='meta'", 'noise = torch.randn(3, device=torch.device("meta"))'),
    ("skip_init", "layer = nn.utils.skip_init(nn.Linear, 4, 4)"),
    ("Lightning's empty init", "fabric = L.Fabric()\nwith fabric.init_module(empty_init=True):\n    model = Net()"),
    ("accelerate's init_empty_weights", "with init_empty_weights():\n    model = Net()"),
    ("accelerate's init_on_device(meta)", 'with init_on_device(torch.device("meta")):\n    model = Net()'),
    ("transformers' no_init_weights", "with no_init_weights():\n    model = Net()"),
    ("a project's own context given device='meta'", 'with DeviceMode(device="meta", dtype=torch.float16):\n    model = Net()'),
]
HEAD = (
    "import lightning as L\nfrom accelerate import init_empty_weights, init_on_device\n"
    "from transformers.modeling_utils import no_init_weights\nfrom tools.modes import DeviceMode\n"
)


@pytest.mark.parametrize("build", [b for _, b in SPARED], ids=[i for i, _ in SPARED])
def test_a_model_built_sparing_its_init_draws_nothing_before_the_seed(lint, build):
    assert late(lint, program(build, head=HEAD)) == set()


DRAWN = [
    ("a plain build", "model = Net()"),
    ("a CPU device context", 'with torch.device("cpu"):\n    model = Net()'),
    ("Lightning without empty init", "fabric = L.Fabric()\nwith fabric.init_module():\n    model = Net()"),
    ("Lightning's empty_init=False", "fabric = L.Fabric()\nwith fabric.init_module(empty_init=False):\n    model = Net()"),
    ("accelerate on CUDA", 'with init_on_device(torch.device("cuda")):\n    model = Net()'),
    ("transformers' no_init_weights turned off", "with no_init_weights(_enable=False):\n    model = Net()"),
    ("a build after the meta block", 'with torch.device("meta"):\n    shell = Net()\nmodel = Net()'),
    ("a plain draw inside empty init", "with init_empty_weights():\n    noise = torch.randn(4)"),
]


@pytest.mark.parametrize("build", [b for _, b in DRAWN], ids=[i for i, _ in DRAWN])
def test_a_model_built_with_its_init_still_draws(lint, build):
    source = program(build, head=HEAD)
    assert late(lint, source) == {("train.py", seed_row(source), "TRP105")}


def test_a_return_inside_the_block_leaves_the_meta_device(lint):
    # The `with` is left on the `return`: the layer built by the caller afterwards draws.
    source = program(
        "model = build()\nhead = nn.Linear(8, 2)",
        head='\n\ndef build():\n    with torch.device("meta"):\n        return Net()\n',
    )
    assert late(lint, source) == {("train.py", seed_row(source), "TRP105")}
    spared = program("model = build()", head='\n\ndef build():\n    with torch.device("meta"):\n        return Net()\n')
    assert late(lint, spared) == set()


def test_an_empty_init_decided_at_run_time_spares_only_where_it_is_on(lint):
    source = program("fabric = L.Fabric()\nwith fabric.init_module(empty_init=fabric.world_size > 1):\n    model = Net()", head=HEAD)
    assert late(lint, source) == {("train.py", seed_row(source), "TRP105")}


# What each weaker context still draws (verified on torch 2.13 with each library's mechanism).
STILL_DRAWN = {
    "a drawn parameter value": "        self.scale = nn.Parameter(torch.randn(8))\n",
    "MultiheadAttention (xavier_uniform_)": "        self.attn = nn.MultiheadAttention(8, 2)\n",
    "a tensor-method fill": "        self.proj.weight.data.normal_(0.0, 0.02)\n",
    "an init function without dispatch": "        nn.init.trunc_normal_(self.proj.weight)\n",
}
# context -> the parts above it spares
CONTEXTS = {
    "fabric.init_module(empty_init=True)": set(),
    "no_init_weights()": {"MultiheadAttention (xavier_uniform_)", "an init function without dispatch"},
    "init_empty_weights()": {"MultiheadAttention (xavier_uniform_)", "an init function without dispatch", "a tensor-method fill"},
    'torch.device("meta")': set(STILL_DRAWN),
}


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("part", list(STILL_DRAWN))
def test_each_context_spares_what_its_library_turns_off(lint, context, part):
    net = NET + STILL_DRAWN[part]
    source = program(f"fabric = L.Fabric()\nwith {context}:\n    model = Net()", head=HEAD).replace(NET, net)
    expected = set() if part in CONTEXTS[context] else {("train.py", seed_row(source), "TRP105")}
    assert late(lint, source) == expected


def test_nested_contexts_are_left_in_order(lint):
    # The inner meta block ends; the outer empty init (Lightning's) still spares Linear's init
    # but not a drawn parameter value.
    net = NET + "        self.scale = nn.Parameter(torch.randn(8))\n"
    inner = 'fabric = L.Fabric()\nwith fabric.init_module(empty_init=True):\n    with torch.device("meta"):\n        shell = Net()\n    model = nn.Linear(4, 4)'
    assert late(lint, program(inner, head=HEAD).replace(NET, net)) == set()
    drawn = inner.replace("model = nn.Linear(4, 4)", "model = Net()")
    source = program(drawn, head=HEAD).replace(NET, net)
    assert late(lint, source) == {("train.py", seed_row(source), "TRP105")}


# -- checkpoints loaded in turns ----------------------------------------------------------------
def turns(loop: str, test: str) -> str:
    return program(
        f"fabric = L.Fabric()\nmodel = Net()\n{loop}\n    if {test}:\n"
        "        model.load_state_dict(torch.load('model.pt'))\n    fabric.barrier()",
        head=HEAD,
    )


@pytest.mark.parametrize(
    "loop, test",
    [
        ("for rank in range(fabric.world_size):", "fabric.global_rank == rank"),
        ("for turn in range(world_size()):", "turn == get_rank()"),
        ("for i in range(fabric.num_processes):", "i == fabric.local_rank"),
    ],
)
def test_a_checkpoint_loaded_in_turns_is_loaded_by_every_process(lint, loop, test):
    head = "\n\ndef world_size():\n    return 2\n\n\ndef get_rank():\n    return 0\n"
    assert late(lint, turns(loop, test).replace(NET, NET + head)) == set()


@pytest.mark.parametrize(
    "loop, test",
    [
        ("for rank in range(fabric.world_size):", "rank == 0"),  # only the first process loads
        ("for step in range(3):", "step == fabric.global_rank"),  # not a loop over the processes
        ("for rank in range(fabric.world_size):", "fabric.global_rank == rank + 1"),
    ],
)
def test_a_load_on_some_processes_only_leaves_the_others_drawn(lint, loop, test):
    source = turns(loop, test)
    assert late(lint, source) == {("train.py", seed_row(source), "TRP105")}


# -- TRP101: a model built on the meta device is no randomness until something initialises it ---
TRAIN = (
    "import torch\nimport torch.nn as nn\n\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(8, 8)\n\n"
    "    def init_weights(self):\n"
    "        nn.init.normal_(self.proj.weight, std=0.02)\n\n\n"
    "if __name__ == '__main__':\n"
    "    with torch.device('meta'):\n"
    "        model = Net()\n"
    "    model.to_empty(device='cpu')\n"
    "    {materialise}\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "    loss = model(torch.ones(2, 8)).sum()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
)


def test_training_weights_built_on_meta_and_loaded_draws_nothing(lint):
    source = TRAIN.replace("{materialise}", "model.load_state_dict(torch.load('base.pt'))")
    assert reported(lint({"train.py": source}, {"select": ["TRP101"]}), lint.root) == set()


def test_training_weights_built_on_meta_then_initialised_draws(lint):
    source = TRAIN.replace("{materialise}", "model.init_weights()")
    assert reported(lint({"train.py": source}, {"select": ["TRP101"]}), lint.root) == {("train.py", 13, "TRP101")}
