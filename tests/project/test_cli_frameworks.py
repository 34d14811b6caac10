"""Programs started by a command-line framework: the commands a typer, click or tyro app runs
when it is called, and what `fire.Fire`, `jsonargparse.CLI` and tyro's runners run."""

from __future__ import annotations

import textwrap

from conftest import marked_lines, reported, write_project
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.runner import fix_sources


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def at_guard(source: str, name: str = "tool.py") -> set:
    """TRP101 at the `__main__` guard of `source`."""
    row = next(i for i, line in enumerate(source.splitlines(), 1) if line.startswith("if __name__"))
    return {(name, row, "TRP101")}


def found(lint, files, code="TRP101"):
    return reported(lint(files, {"select": [code]}), lint.root, code)


# A command that builds a model and draws noise, never seeding.
DRAWS = "    net = torch.nn.Linear(6, 3)\n    return net(torch.randn(2, 6))\n"


# -- typer ------------------------------------------------------------------------------------
def test_typer_app_runs_its_commands_when_called(lint):
    source = dedent('''
        import torch
        import typer

        cli_app = typer.Typer()

        @cli_app.command()
        def fit(steps: int = 5):
        ''') + DRAWS + dedent('''
        @cli_app.command("report")
        def summarize():
            print("done")

        if __name__ == "__main__":  # <-- TRP101
            cli_app()
        ''')
    assert found(lint, {"tool.py": source}) == marked_lines({"tool.py": source})


def test_typer_callback_that_seeds_runs_before_every_command(lint):
    source = dedent('''
        import torch
        import typer

        cli_app = typer.Typer()

        @cli_app.callback()
        def setup(seed: int = 11):
            torch.manual_seed(seed)

        @cli_app.command()
        def fit():
        ''') + DRAWS + dedent('''
        if __name__ == "__main__":
            cli_app()
        ''')
    assert found(lint, {"tool.py": source}) == set()
    assert found(lint, {"tool.py": source}, "TRP105") == set()
    unseeded = source.replace("torch.manual_seed(seed)", "print(seed)")
    assert found(lint, {"tool.py": unseeded}) == at_guard(unseeded)


def test_typer_app_calling_a_callback_given_to_the_constructor(lint):
    source = dedent('''
        import torch
        import typer

        def setup():
            torch.manual_seed(5)

        cli_app = typer.Typer(callback=setup)

        @cli_app.command()
        def fit():
        ''') + DRAWS + dedent('''
        if __name__ == "__main__":
            cli_app()
        ''')
    assert found(lint, {"tool.py": source}) == set()
    assert found(lint, {"tool.py": source.replace("callback=setup", "")}) == at_guard(source)


def test_typer_sub_app_of_another_module_runs_through_add_typer(lint):
    files = {
        "kit/__init__.py": "",
        "kit/models.py": "import torch\nimport typer\n\nmodels_app = typer.Typer()\n\n@models_app.command()\ndef fit():\n" + DRAWS,
        "kit/main.py": dedent('''
            import typer
            from kit import models

            root = typer.Typer()
            root.add_typer(models.models_app, name="models")

            if __name__ == "__main__":  # <-- TRP101
                root()
            '''),
    }
    assert found(lint, files) == marked_lines(files)


def test_typer_app_imported_by_a_package_main(lint):
    files = {
        "kit/__init__.py": "",
        "kit/commands.py": "import torch\nimport typer\n\napp = typer.Typer()\n\n@app.command()\ndef fit():\n" + DRAWS,
        "kit/__main__.py": "from kit.commands import app\n\napp(prog_name='kit')\n",
    }
    assert found(lint, files) == {("kit/__main__.py", 1, "TRP101")}


def test_a_command_parameter_is_given_by_the_command_line_not_its_default(lint):
    # typer passes every parameter: `seed` is the user's, so the seeding branch may run.
    source = dedent('''
        from typing import Optional

        import torch
        import typer

        cli_app = typer.Typer()

        @cli_app.command()
        def fit(seed: Optional[int] = None):
            if seed is not None:
                torch.manual_seed(seed)
        ''') + DRAWS + dedent('''
        @cli_app.command()
        def other():
            pass

        if __name__ == "__main__":
            cli_app()
        ''')
    assert found(lint, {"tool.py": source}) == set()
    unseeded = source.replace("torch.manual_seed(seed)", "print(seed)")
    assert found(lint, {"tool.py": unseeded}) == at_guard(unseeded)


def test_typer_run_gives_parameters_from_the_command_line(lint):
    source = dedent('''
        import torch
        import typer

        def main(seed: int = None):
            if seed is not None:
                torch.manual_seed(seed)
        ''') + DRAWS + dedent('''
        if __name__ == "__main__":
            typer.run(main)
        ''')
    assert found(lint, {"tool.py": source}) == set()


def test_commands_of_an_app_that_is_never_called_do_not_run(lint):
    # The importer takes a helper from a module whose app it never calls.
    files = {
        "kit/__init__.py": "",
        "kit/commands.py": dedent('''
            import torch
            import typer

            app = typer.Typer()

            def shape():
                return (2, 6)

            @app.command()
            def fit():
            ''') + DRAWS,
        "report.py": "from kit.commands import shape\n\nif __name__ == '__main__':\n    print(shape())\n",
    }
    assert found(lint, files) == set()
    files["report.py"] = "from kit.commands import app, shape\n\nif __name__ == '__main__':\n    print(shape())\n    app()\n"
    assert found(lint, files) == {("report.py", 3, "TRP101")}


# -- click ------------------------------------------------------------------------------------
GROUP = dedent('''
    import click
    import torch

    @click.group()
    def tools():
        pass

    @tools.command()
    @click.option("--steps", default=3)
    def fit(steps):
    ''') + DRAWS + dedent('''
    @tools.command()
    def evaluate():
        pass
    ''')


def test_click_group_runs_its_commands_when_called(lint):
    source = GROUP + '\nif __name__ == "__main__":  # <-- TRP101\n    tools(obj={})\n'
    assert found(lint, {"tool.py": source}) == marked_lines({"tool.py": source})


def test_click_group_main_method_runs_it(lint):
    source = GROUP + '\nif __name__ == "__main__":  # <-- TRP101\n    tools.main(standalone_mode=False)\n'
    assert found(lint, {"tool.py": source}) == marked_lines({"tool.py": source})


def test_click_group_that_seeds_in_its_callback(lint):
    source = GROUP.replace("def tools():\n    pass", "def tools():\n    torch.manual_seed(2)")
    source += '\nif __name__ == "__main__":\n    tools()\n'
    assert found(lint, {"tool.py": source}) == set()
    assert found(lint, {"tool.py": source}, "TRP105") == set()  # the group's callback runs first
    assert found(lint, {"tool.py": source.replace("torch.manual_seed(2)", "pass")}) == at_guard(source)


def test_click_nested_group(lint):
    source = dedent('''
        import click
        import torch

        @click.group()
        def tools():
            pass

        @tools.group()
        def models():
            pass

        @models.command()
        def fit():
        ''') + DRAWS + dedent('''
        if __name__ == "__main__":  # <-- TRP101
            tools()
        ''')
    assert found(lint, {"tool.py": source}) == marked_lines({"tool.py": source})


def test_click_add_command_runs_when_the_group_is_called(lint):
    # `add_command` files the command; only calling the group runs it.
    files = {
        "kit/__init__.py": "",
        "kit/cli.py": dedent('''
            import click
            import torch

            @click.group()
            def tools():
                pass

            @click.command()
            def fit():
            ''') + DRAWS + dedent('''
            def shape():
                return (2, 6)

            tools.add_command(fit, name="train")
            '''),
        "report.py": "from kit.cli import shape\n\nif __name__ == '__main__':\n    print(shape())\n",
    }
    assert found(lint, files) == set()
    files["run.py"] = "from kit.cli import tools\n\nif __name__ == '__main__':  # <-- TRP101\n    tools()\n"
    assert found(lint, files) == marked_lines(files)


# -- console scripts naming an app ------------------------------------------------------------
def _pyproject(target: str) -> str:
    return f'[project]\nname = "fixture"\n\n[project.scripts]\nkit = "{target}"\n\n[tool.torchrepro-lint]\nselect = ["TRP101"]\n'


def test_console_script_naming_a_typer_app(lint):
    files = {
        "kit/__init__.py": "",
        "kit/cli.py": "import torch\nimport typer\n\napp = typer.Typer()\n\n@app.command()\ndef fit():\n" + DRAWS,
    }
    assert found(lint, files) == set()  # no script declared: a library
    files["pyproject.toml"] = _pyproject("kit.cli:app")
    result = lint(files)
    assert reported(result, lint.root) == {("kit/cli.py", 4, "TRP101")}
    (finding,) = result.findings
    assert "in the callback of `app` or at the start of each of its commands" in finding.message
    assert finding.fix is None  # no one place runs before every command


def test_console_script_naming_a_click_group_is_fixed_in_the_group(tmp_path):
    files = {"kit/__init__.py": "", "kit/cli.py": GROUP, "pyproject.toml": _pyproject("kit.cli:tools")}
    write_project(tmp_path, files)
    outcome = fix_sources({tmp_path / n: t for n, t in files.items()}, load_config([tmp_path]), True)
    fixed = outcome.fixed[tmp_path / "kit/cli.py"]
    assert "def tools():\n    torch.manual_seed(0)\n    pass" in fixed


# -- runners given several commands ------------------------------------------------------------
RUNNERS = {
    "jsonargparse list": ("from jsonargparse import CLI", "CLI([fit, check])"),
    "jsonargparse dict": ("from jsonargparse import CLI", "CLI({'fit': fit, 'more': {'check': check}})"),
    "tyro dict": ("import tyro", "tyro.extras.subcommand_cli_from_dict({'fit': fit, 'check': check})"),
    "fire dict": ("import fire", "fire.Fire({'fit': fit, 'check': check})"),
    "absl": ("from absl import app", "app.run(fit)"),
}


def test_runners_given_a_list_or_dict_of_commands(lint):
    for name, (imported, run) in RUNNERS.items():
        source = f"import torch\n{imported}\n\ndef fit(steps=2):\n{DRAWS}\ndef check():\n    pass\n\nif __name__ == '__main__':  # <-- TRP101\n    {run}\n"
        assert found(lint, {"tool.py": source}) == marked_lines({"tool.py": source}), name


def test_tyro_subcommand_app(lint):
    source = dedent('''
        import torch
        from tyro.extras import SubcommandApp

        app = SubcommandApp()

        @app.command
        def fit():
        ''') + DRAWS + dedent('''
        if __name__ == "__main__":  # <-- TRP101
            app.cli()
        ''')
    assert found(lint, {"tool.py": source}) == marked_lines({"tool.py": source})


def test_a_runner_calls_its_function_in_order(lint):
    # fire runs `main` there and then: a seed after its draw is late.
    source = dedent('''
        import fire
        import torch

        def main():
            net = torch.nn.Linear(2, 2)
            torch.manual_seed(1)
            return net

        if __name__ == "__main__":
            fire.Fire(main)
        ''')
    assert found(lint, {"tool.py": source}, "TRP105") == {("tool.py", 6, "TRP105")}


def test_hydra_main_seeding_from_its_config(lint):
    source = dedent('''
        import hydra
        import lightning as L
        import torch

        @hydra.main(version_base=None, config_path="conf", config_name="train")
        def main(cfg):
            L.seed_everything(cfg.seed)
            return torch.nn.Linear(cfg.width, 2)

        if __name__ == "__main__":
            main()
        ''')
    assert found(lint, {"tool.py": source}) == set()
    assert found(lint, {"tool.py": source.replace("L.seed_everything(cfg.seed)", "pass")}) == {("tool.py", 10, "TRP101")}


# -- the language server's lowering of an edited buffer ---------------------------------------
def test_an_edit_filing_a_command_inside_a_function_lowers_the_group_again():
    # A click group's IR holds its commands; `add_command` typed in another function's body
    # (an edit that otherwise keeps every other function's IR) changes it.
    from torchrepro_lint.analysis.module_index import ModuleIndex
    from torchrepro_lint.parsing.source import SourceFile
    from torchrepro_lint.pipeline.cache import structural_digest
    from torchrepro_lint.project.extract.function_reuse import function_reuse
    from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
    from torchrepro_lint.server.edited_source import EditedSource

    before = GROUP + "\ndef main():\n    print(1)\n    tools()\n"
    after = before.replace("    print(1)\n", "    tools.add_command(fit)\n")
    first = EditedSource("script.py", before)
    lowering = Lowering(ModuleIndex(first, "pkg"), None, ExpressionTexts.start())
    module_ir = lowering.build()
    edited = EditedSource("script.py", after, previous=first.parsed)
    index = ModuleIndex(edited, "pkg")
    again = Lowering(index, None, lowering.texts)
    again.reuse = function_reuse(index, first.module, module_ir, lowering.nodes, lowering.layout, first.text)
    assert again.reuse is not None and "fit" in again.reuse.paths  # (the edit keeps other functions)
    whole = SourceFile("script.py", after)
    whole.__dict__["module"] = edited.module
    expected = Lowering(ModuleIndex(whole, "pkg"), None, ExpressionTexts.start()).build()
    assert structural_digest(again.build()) == structural_digest(expected)
