"""The fixes of TRP105 (a late seed moved above the first draw), TRP302 (a split given its own
seed) and TRP304 (`sampler.set_epoch(epoch)` at the top of the epoch loop): each from hazard to
exact source, re-linted without that finding, fixed again without change; and the shapes where
the fix must not be offered, each still reported, without a fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import lint_project, write_project
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.runner import fix_sources


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def fixed(tmp_path: Path, files: dict[str, str], config: dict):
    write_project(tmp_path, files, config)
    sources = {tmp_path / name: text for name, text in files.items()}
    outcome = fix_sources(sources, load_config([tmp_path]), unsafe=True)
    return {p.relative_to(tmp_path).as_posix(): t for p, t in outcome.fixed.items()}, outcome


# -- where each fix applies: (code, before, after, config) ------------------------------------
APPLIES = {
    "TRP304-names-in-one-function": (
        "TRP304",
        {"trainer.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler

            def fit(net, corpus, first_epoch, n_epochs):
                shard_sampler = DistributedSampler(corpus, seed=3)
                batches = DataLoader(corpus, batch_size=16, sampler=shard_sampler)
                for ep in range(first_epoch, n_epochs):
                    # one pass over this rank's shard
                    for step, batch in enumerate(batches):
                        net(batch)
            ''')},
        {"trainer.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler

            def fit(net, corpus, first_epoch, n_epochs):
                shard_sampler = DistributedSampler(corpus, seed=3)
                batches = DataLoader(corpus, batch_size=16, sampler=shard_sampler)
                for ep in range(first_epoch, n_epochs):
                    shard_sampler.set_epoch(ep)
                    # one pass over this rank's shard
                    for step, batch in enumerate(batches):
                        net(batch)
            ''')},
        {},
    ),
    "TRP304-module-level-loop-nested-in-with": (
        "TRP304",
        {"run.py": dedent('''
            import contextlib
            import torch.utils.data as tud

            if __name__ == "__main__":
                points = list(range(64))
                smp = tud.distributed.DistributedSampler(points, num_replicas=2, rank=0)
                with contextlib.nullcontext():
                    for epoch_index in range(5):
                        for xs in tud.DataLoader(points, sampler=smp):
                            print(xs)
            ''')},
        {"run.py": dedent('''
            import contextlib
            import torch.utils.data as tud

            if __name__ == "__main__":
                points = list(range(64))
                smp = tud.distributed.DistributedSampler(points, num_replicas=2, rank=0)
                with contextlib.nullcontext():
                    for epoch_index in range(5):
                        smp.set_epoch(epoch_index)
                        for xs in tud.DataLoader(points, sampler=smp):
                            print(xs)
            ''')},
        {},
    ),
    "TRP105-class-built-then-seeded": (
        "TRP105",
        {"main.py": dedent('''
            import torch
            import torch.nn as nn

            class Tower(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.proj = nn.Linear(width, width)

            def run(cfg):
                steps = cfg.steps
                tower = Tower(cfg.width)
                # make the rest repeatable
                torch.manual_seed(cfg.seed)
                return tower(torch.ones(2, cfg.width)), steps

            if __name__ == "__main__":
                run(None)
            ''')},
        {"main.py": dedent('''
            import torch
            import torch.nn as nn

            class Tower(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.proj = nn.Linear(width, width)

            def run(cfg):
                steps = cfg.steps
                # make the rest repeatable
                torch.manual_seed(cfg.seed)
                tower = Tower(cfg.width)
                return tower(torch.ones(2, cfg.width)), steps

            if __name__ == "__main__":
                run(None)
            ''')},
        {},
    ),
    "TRP105-a-seeding-function-of-the-same-file-moved-at-its-call": (
        "TRP105",
        {"go.py": dedent('''
            import random

            import numpy as np
            import torch


            def fix_all_seeds(value):
                """Seed every generator."""
                random.seed(value)
                np.random.seed(value)
                torch.manual_seed(value)
                if torch.cuda.is_available():
                    torch.cuda.manual_seed_all(value)


            def make_head(n):
                return torch.nn.Linear(n, 2)


            def main(opts):
                head = make_head(opts.dim)
                print("built")
                fix_all_seeds(opts.seed)  # after the head: too late
                return head


            if __name__ == "__main__":
                main(None)
            ''')},
        {"go.py": dedent('''
            import random

            import numpy as np
            import torch


            def fix_all_seeds(value):
                """Seed every generator."""
                random.seed(value)
                np.random.seed(value)
                torch.manual_seed(value)
                if torch.cuda.is_available():
                    torch.cuda.manual_seed_all(value)


            def make_head(n):
                return torch.nn.Linear(n, 2)


            def main(opts):
                fix_all_seeds(opts.seed)  # after the head: too late
                head = make_head(opts.dim)
                print("built")
                return head


            if __name__ == "__main__":
                main(None)
            ''')},
        {},
    ),
    "TRP105-a-seeding-function-of-another-module": (
        "TRP105",
        {
            "entry.py": dedent('''
                import torch
                from seeding import reset_rngs

                if __name__ == "__main__":
                    probe = torch.rand(3)
                    reset_rngs(11)
                    print(probe)
                '''),
            "seeding.py": dedent('''
                import os
                import torch

                def reset_rngs(s):
                    os.environ["PYTHONHASHSEED"] = str(s)
                    torch.manual_seed(s)
                    torch.backends.cudnn.benchmark = False
                '''),
        },
        {"entry.py": dedent('''
            import torch
            from seeding import reset_rngs

            if __name__ == "__main__":
                reset_rngs(11)
                probe = torch.rand(3)
                print(probe)
            ''')},
        {},
    ),
    "TRP105-a-seed-between-blank-lines-leaves-one": (
        "TRP105",
        {"bench.py": dedent('''
            import torch

            if __name__ == "__main__":
                size = 8
                query = torch.rand(size, size)

                torch.manual_seed(size)

                print(query @ query)
            ''')},
        {"bench.py": dedent('''
            import torch

            if __name__ == "__main__":
                size = 8
                torch.manual_seed(size)
                query = torch.rand(size, size)

                print(query @ query)
            ''')},
        {},
    ),
    "TRP302-per-rank-seed-in-the-same-function": (
        "TRP302",
        {"split.py": dedent('''
            import torch as th
            from torch.utils.data import random_split

            def prepare(opts, local_rank, samples):
                th.manual_seed(opts.base_seed + local_rank)
                return random_split(samples, [0.8, 0.2])

            if __name__ == "__main__":
                prepare(None, 0, [])
            ''')},
        {"split.py": dedent('''
            import torch as th
            from torch.utils.data import random_split

            def prepare(opts, local_rank, samples):
                th.manual_seed(opts.base_seed + local_rank)
                return random_split(samples, [0.8, 0.2], generator=th.Generator().manual_seed(opts.base_seed))

            if __name__ == "__main__":
                prepare(None, 0, [])
            ''')},
        {},
    ),
    "TRP302-module-constant-replaces-a-positional-None-and-torch-is-imported": (
        "TRP302",
        {"holdout.py": dedent('''
            from torch.utils.data import random_split
            from torch import distributed as dist, manual_seed

            BASE = 1234

            def holdout(items):
                return random_split(items, [90, 10], None)

            def main():
                manual_seed(dist.get_rank() + BASE)
                holdout([])

            if __name__ == "__main__":
                main()
            ''')},
        {"holdout.py": dedent('''
            from torch.utils.data import random_split
            from torch import distributed as dist, manual_seed
            import torch

            BASE = 1234

            def holdout(items):
                return random_split(items, [90, 10], torch.Generator().manual_seed(BASE))

            def main():
                manual_seed(dist.get_rank() + BASE)
                holdout([])

            if __name__ == "__main__":
                main()
            ''')},
        {},
    ),
    "TRP302-sklearn-in-a-program-that-seeds-nothing-takes-the-seed-setting": (
        "TRP302",
        {"cv.py": dedent('''
            from sklearn.model_selection import ShuffleSplit, train_test_split

            def pick(rows, labels):
                tr, te = train_test_split(rows, test_size=0.25, random_state=None)
                return ShuffleSplit(n_splits=3).split(tr), te
            ''')},
        {"cv.py": dedent('''
            from sklearn.model_selection import ShuffleSplit, train_test_split

            def pick(rows, labels):
                tr, te = train_test_split(rows, test_size=0.25, random_state=321)
                return ShuffleSplit(n_splits=3, random_state=321).split(tr), te
            ''')},
        {"seed": 321},
    ),
}


@pytest.mark.parametrize("case", sorted(APPLIES))
def test_fix_gives_the_expected_source_and_converges(tmp_path, case):
    code, before, after, extra = APPLIES[case]
    config = {"select": [code], **extra}
    result, outcome = fixed(tmp_path, before, config)
    assert result == after
    assert {f.fix.applicability for f in outcome.applied} == {"unsafe"}
    assert not [f for f in outcome.result.findings if f.code == code]  # re-lints clean for that code
    again, _ = fixed(tmp_path, {**before, **after}, config)
    assert again == {}  # a second --fix changes nothing


def test_the_fixes_need_unsafe_fixes(tmp_path):
    code, before, _, extra = APPLIES["TRP105-class-built-then-seeded"]
    write_project(tmp_path, before, {"select": [code], **extra})
    outcome = fix_sources({tmp_path / n: t for n, t in before.items()}, load_config([tmp_path]), unsafe=False)
    assert outcome.fixed == {} and [f.code for f in outcome.result.findings] == [code]


# -- where no fix may be offered: (code, files); each is still reported ------------------------
NO_FIX = {
    "TRP304-loop-in-another-function": (
        "TRP304",
        {"a.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler

            def make(ds):
                sampler = DistributedSampler(ds)
                return DataLoader(ds, sampler=sampler)

            def train(ds, epochs):
                loader = make(ds)
                for epoch in range(epochs):
                    for batch in loader:
                        pass
            ''')},
    ),
    "TRP304-loop-variable-not-a-name": (
        "TRP304",
        {"a.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler

            class Loop:
                def train(self, ds, epochs):
                    sampler = DistributedSampler(ds)
                    loader = DataLoader(ds, sampler=sampler)
                    for self.epoch in range(epochs):
                        for batch in loader:
                            pass
            ''')},
    ),
    "TRP304-epoch-loop-not-over-range": (
        "TRP304",
        {"a.py": dedent('''
            import glob
            from torch.utils.data import DataLoader, DistributedSampler

            def train(ds):
                sampler = DistributedSampler(ds)
                loader = DataLoader(ds, sampler=sampler)
                for epoch in glob.glob("epoch_*.pt"):
                    for batch in loader:
                        pass
            ''')},
    ),
    "TRP304-sampler-rebound-in-the-same-block": (
        "TRP304",
        {"a.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

            def train(ds, epochs, world):
                sampler = DistributedSampler(ds)
                if world == 1:
                    sampler = RandomSampler(ds)
                loader = DataLoader(ds, sampler=sampler)
                for epoch in range(epochs):
                    for batch in loader:
                        pass
            ''')},
    ),
    "TRP304-sampler-chosen-by-a-branch": (
        "TRP304",
        {"a.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

            def train(ds, epochs, distributed):
                if distributed:
                    sampler = DistributedSampler(ds)
                else:
                    sampler = RandomSampler(ds)
                loader = DataLoader(ds, sampler=sampler)
                for epoch in range(epochs):
                    for batch in loader:
                        pass
            ''')},
    ),
    "TRP304-sampler-built-inline": (
        "TRP304",
        {"a.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler

            def train(ds, epochs):
                loader = DataLoader(ds, sampler=DistributedSampler(ds))
                for epoch in range(epochs):
                    for batch in loader:
                        pass
            ''')},
    ),
    "TRP304-loop-does-not-iterate-the-loader": (
        "TRP304",
        {"a.py": dedent('''
            from torch.utils.data import DataLoader, DistributedSampler

            def train(ds, epochs, step):
                sampler = DistributedSampler(ds)
                loader = DataLoader(ds, sampler=sampler)
                for epoch in range(epochs):
                    step(loader)
            ''')},
    ),
    "TRP105-seed-reassigned-between": (
        "TRP105",
        {"a.py": dedent('''
            import torch

            def main(cfg):
                net = torch.nn.Linear(2, 2)
                seed = cfg.seed
                torch.manual_seed(seed)
                return net

            if __name__ == "__main__":
                main(None)
            ''')},
    ),
    "TRP105-config-changed-by-a-method-between": (
        "TRP105",
        {"a.py": dedent('''
            import torch

            def main(cfg, path):
                net = torch.nn.Linear(2, 2)
                cfg.merge_from_file(path)
                torch.manual_seed(cfg.SEED)
                return net

            if __name__ == "__main__":
                main(None, None)
            ''')},
    ),
    "TRP105-seed-in-another-block": (
        "TRP105",
        {"a.py": dedent('''
            import torch

            def main(args):
                net = torch.nn.Linear(2, 2)
                if args.seed is not None:
                    torch.manual_seed(args.seed)
                return net

            if __name__ == "__main__":
                main(None)
            ''')},
    ),
    "TRP105-draw-at-module-level-seed-in-main": (
        "TRP105",
        {"a.py": dedent('''
            import torch

            NOISE = torch.randn(4)

            def main():
                torch.manual_seed(0)
                return NOISE

            if __name__ == "__main__":
                main()
            ''')},
    ),
    "TRP105-seed-computed-from-the-rank": (
        "TRP105",
        {"a.py": dedent('''
            import torch
            import torch.distributed as dist

            def main():
                net = torch.nn.Linear(2, 2)
                torch.manual_seed(1 + dist.get_rank())
                return net

            if __name__ == "__main__":
                main()
            ''')},
    ),
    "TRP105-seed-paired-with-a-later-reseed": (
        "TRP105",
        {"a.py": dedent('''
            import torch

            def compare(ours, theirs):
                tokens = torch.randint(0, 100, (2, 8))
                torch.manual_seed(0)
                left = ours(tokens)
                torch.manual_seed(0)
                right = theirs(tokens)
                return left, right

            if __name__ == "__main__":
                compare(None, None)
            ''')},
    ),
    "TRP105-star-args": (
        "TRP105",
        {"a.py": dedent('''
            import torch

            def main(seeds):
                net = torch.nn.Linear(2, 2)
                torch.manual_seed(*seeds)
                return net

            if __name__ == "__main__":
                main([0])
            ''')},
    ),
    "TRP105-helper-that-does-more-than-seeding": (
        "TRP105",
        {
            "a.py": dedent('''
                import torch
                from setup import seed_and_prepare

                if __name__ == "__main__":
                    net = torch.nn.Linear(2, 2)
                    seed_and_prepare(5)
                '''),
            "setup.py": dedent('''
                import os
                import torch

                def seed_and_prepare(seed):
                    torch.manual_seed(seed)
                    os.makedirs("runs", exist_ok=True)
                '''),
        },
    ),
    "TRP302-no-seed-in-scope": (
        "TRP302",
        {"a.py": dedent('''
            import torch
            from torch.utils.data import random_split

            def build(ds, args):
                return random_split(ds, [0.5, 0.5])

            def main(args, rank):
                torch.manual_seed(args.seed + rank)
                build(None, args)

            if __name__ == "__main__":
                main(None, 0)
            ''')},
    ),
    "TRP302-seed-name-rebound-before-the-split": (
        "TRP302",
        {"a.py": dedent('''
            import torch
            from torch.utils.data import random_split

            def main(args, rank, load):
                torch.manual_seed(args.seed + rank)
                args = load()
                return random_split([], [0.5, 0.5])

            if __name__ == "__main__":
                main(None, 0, None)
            ''')},
    ),
    "TRP302-seed-that-carries-the-rank-through-a-variable": (
        "TRP302",
        {"a.py": dedent('''
            import torch
            from torch.utils.data import random_split

            def main(args, rank):
                seed = args.seed + rank
                torch.manual_seed(seed)
                return random_split([], [0.5, 0.5])

            if __name__ == "__main__":
                main(None, 0)
            ''')},
    ),
    "TRP302-two-seeds-in-scope": (
        "TRP302",
        {"a.py": dedent('''
            import random
            import torch
            from torch.utils.data import random_split

            def main(args, rank):
                torch.manual_seed(args.seed + rank)
                random.seed(args.data_seed)
                return random_split([], [0.5, 0.5])

            if __name__ == "__main__":
                main(None, 0)
            ''')},
    ),
}


@pytest.mark.parametrize("case", sorted(NO_FIX))
def test_no_fix_is_offered(tmp_path, case):
    code, files = NO_FIX[case]
    result = lint_project(tmp_path, files, {"select": [code]})
    findings = [f for f in result.findings if f.code == code]
    assert findings, "the hazard is still reported"
    assert [f.fix for f in findings] == [None] * len(findings)


def test_moved_and_inserted_lines_keep_the_files_line_endings(tmp_path):
    move = "import torch\r\n\r\nif __name__ == '__main__':\r\n    x = torch.randn(3)\r\n    torch.manual_seed(0)"
    result, _ = fixed(tmp_path, {"m.py": move}, {"select": ["TRP105"]})
    assert result == {"m.py": "import torch\r\n\r\nif __name__ == '__main__':\r\n    torch.manual_seed(0)\r\n    x = torch.randn(3)\r\n"}
    insert = (
        "from torch.utils.data import DataLoader, DistributedSampler\r\n\r\ndef f(ds, n_epochs):\r\n"
        "    s = DistributedSampler(ds)\r\n    dl = DataLoader(ds, sampler=s)\r\n    for e in range(n_epochs):\r\n"
        "        for b in dl:\r\n            pass\r\n"
    )
    result, _ = fixed(tmp_path, {"i.py": insert}, {"select": ["TRP304"]})
    assert result == {"i.py": insert.replace("range(n_epochs):\r\n", "range(n_epochs):\r\n        s.set_epoch(e)\r\n")}
