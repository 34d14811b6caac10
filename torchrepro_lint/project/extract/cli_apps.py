"""Command-line apps: what a typer, click or tyro app runs when it is called, and what a
command-line framework's runner (`fire.Fire(main)`, `jsonargparse.CLI([fit, test])`) runs.

Registering a command runs nothing; the app runs its commands when it is called:
- typer 0.29 (typer/main.py): `@app.command()` and `app.command()(f)` append to the app's
  `registered_commands`, `@app.callback()` (or `Typer(callback=f)`) sets its callback,
  `app.add_typer(sub)` files another app as a group. `Typer.__call__` builds a click command
  from them (`get_command`) and runs it: the callback, then the one command the command line names.
- click 8.5 (click/core.py): `@click.group()` makes the function a Group whose callback it is;
  `@cli.command()`, `@cli.group()`, `cli.add_command(cmd)` file commands in it. Calling the group
  (`__call__` -> `main` -> `Group.invoke`) runs its callback, then the command named.
- tyro 1.0 (tyro/extras/_subcommand_app.py): `SubcommandApp`'s `@app.command` (or
  `app.command(f)`) files a function or a nested app; `app.cli()` runs the one named.
So an app object (a module-level `app = typer.Typer()`) is lowered as a function of its module
under the app's name, whose body calls the callback and then one of the commands (branches on
an unknown condition); a click group's own function gets the same after its body. Calling the
app (`app()`, `cli.main()`, `app.cli()`, from its module or another) or naming it as a console
script runs the commands; importing its module does not. Each command is called as the framework
calls it, with every parameter from the command line (FROM_COMMAND_LINE: none keeps its default,
`def main(seed: int = None)` may be given a seed). Only registrations in the app's own module
are seen: `@app.command()` in a module that imports `app` is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.syntax import arg
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.call_syntax import is_project_name
from torchrepro_lint.project.known_apis import CLI_APP_CLASSES, CLI_GROUP_DECORATORS, CLI_RUNNERS

# A call's keyword arguments meaning "every parameter given, values unknown" (interpreter/calls.py)
FROM_COMMAND_LINE = (("**", ir.UNKNOWN),)
_COMMANDS = frozenset({"command", "group", "add_command", "add_typer"})
_CALLBACKS = frozenset({"callback"})
_FRAMEWORKS = frozenset({"typer", "click", "tyro"})  # (the roots of the names in known_apis)
_INVOKING = frozenset({"main", "cli"})  # click's Group.main, tyro's SubcommandApp.cli


@dataclass
class App:
    node: cst.CSTNode  # the group's def, or the call that builds the app object
    group: bool  # a click group's function: its own body is the callback
    callbacks: list = field(default_factory=list)  # (qualname, the registering node)
    commands: list = field(default_factory=list)  # (qualnames run in turn, the registering node)


@dataclass
class Apps:
    apps: dict[str, App] = field(default_factory=dict)  # by module-level name
    registering: set[int] = field(default_factory=set)  # id() of calls that only file a function

    def invoked(self, index: ModuleIndex, node: cst.Call) -> str | None:
        """The app of this module that `node` runs (`app()`, `cli.main()`, `app.cli()`), if any."""
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _INVOKING:
            func = func.value
        return app_named(index, func, self.apps)


def find_apps(index: ModuleIndex) -> Apps:
    found = Apps()
    if not any(record.module and record.module.split(".")[0] in _FRAMEWORKS for record in index.imports):
        return found
    apps = found.apps
    defs = {path: node for path, node in index.functions.items() if "." not in path}
    for name, value in index.scope.bindings.items():
        if isinstance(value, cst.Call) and name not in defs and index.resolve(value.func, value) in CLI_APP_CLASSES:
            apps[name] = App(value, False)
            found.registering.add(id(value))  # `Typer(callback=main)`
            _register(index, arg(value, None, "callback"), value, apps[name].callbacks)
    grown = True
    while grown:  # `@click.group()`, then `@cli.group()` on a group found before
        grown = False
        for path, node in defs.items():
            if path not in apps and any(_makes_group(index, d.decorator, apps) for d in node.decorators):
                apps[path] = App(node, True)
                grown = True
    if not apps:
        return found
    for path, node in defs.items():
        for decorator in node.decorators:
            filed = _filing(index, decorator.decorator, apps)
            if filed is not None:
                app, method = filed
                if method in _CALLBACKS:
                    app.callbacks.append((LOCAL + path, decorator))
                else:
                    app.commands.append(((LOCAL + path,), decorator))
    for site in index.calls:
        node = site.node
        filed = _filing(index, node.func, apps)
        if filed is None:
            continue
        app, method = filed
        if isinstance(node.func, cst.Call):  # `app.command(...)(train)`
            target = arg(node, 0, None)
        elif method in ("add_command", "add_typer") or (method == "command" and _is_function_value(node)):
            target = arg(node, 0, None)  # `cli.add_command(train)`, `app.command(train)`
        else:
            continue  # `app.command("name")`: the decorator it returns is applied elsewhere
        found.registering.add(id(node))
        if method in _CALLBACKS:
            _register(index, target, node, app.callbacks)
        else:
            before = []  # `app.add_typer(sub, callback=f)`: f runs before sub's commands
            _register(index, arg(node, None, "callback") if method == "add_typer" else None, node, before)
            names = [q for q, _ in before]
            own = _qualname(index, target, node)
            if own is not None:
                app.commands.append(((*names, own), node))
    return found


def app_named(index: ModuleIndex, expr: cst.BaseExpression, apps: dict[str, App]) -> str | None:
    """The app `expr` names: a module-level name bound to one, not shadowed where `expr` is."""
    if not isinstance(expr, cst.Name) or expr.value not in apps:
        return None
    name, app = expr.value, apps[expr.value]
    if app.group:
        return name if index.resolve(expr) == LOCAL + name else None
    return name if index.assigned_value(name, expr) is app.node else None


def _makes_group(index: ModuleIndex, decorator: cst.BaseExpression, apps: dict[str, App]) -> bool:
    target = decorator.func if isinstance(decorator, cst.Call) else decorator
    if isinstance(target, cst.Attribute) and target.attr.value == "group" and app_named(index, target.value, apps):
        return True
    return isinstance(target, (cst.Name, cst.Attribute)) and index.resolve(target, decorator) in CLI_GROUP_DECORATORS


def _filing(index: ModuleIndex, expr: cst.BaseExpression, apps: dict[str, App]) -> tuple[App, str] | None:
    """(app, method) for `app.command`, `app.command(...)`, `cli.add_command`, `app.callback(...)`."""
    target = expr.func if isinstance(expr, cst.Call) else expr
    if not isinstance(target, cst.Attribute) or target.attr.value not in _COMMANDS | _CALLBACKS:
        return None
    name = app_named(index, target.value, apps)
    return (apps[name], target.attr.value) if name is not None else None


def _is_function_value(node: cst.Call) -> bool:
    """`app.command(train)` (tyro, click >= 8.1), not `app.command("name")`, whose result decorates."""
    first = arg(node, 0, None)
    return isinstance(first, (cst.Name, cst.Attribute))


def _qualname(index: ModuleIndex, expr: cst.BaseExpression | None, at: cst.CSTNode) -> str | None:
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    q = index.resolve(expr, at)
    return q if is_project_name(q) else None


def _register(index: ModuleIndex, expr, at: cst.CSTNode, into: list) -> None:
    q = _qualname(index, expr, at)
    if q is not None:
        into.append((q, at))


def components(index: ModuleIndex, expr: cst.BaseExpression | None, at: cst.CSTNode, depth: int = 0) -> list[str]:
    """The project functions (or classes) a runner is given: one, or a list, tuple or dict of them
    (nested dicts are command groups), directly or through a name bound to such a literal."""
    if expr is None or depth > 3:
        return []
    if isinstance(expr, cst.Name) and isinstance(bound := index.assigned_value(expr.value, expr), (cst.List, cst.Tuple, cst.Dict, cst.Set)):
        return components(index, bound, at, depth + 1)
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return [q for e in expr.elements if isinstance(e, cst.Element) for q in components(index, e.value, at, depth + 1)]
    if isinstance(expr, cst.Dict):
        return [q for e in expr.elements if isinstance(e, cst.DictElement) for q in components(index, e.value, at, depth + 1)]
    q = _qualname(index, expr, at)
    return [q] if q is not None else []


def runner_components(index: ModuleIndex, node: cst.Call, qualname: str | None) -> tuple[cst.BaseExpression | None, list[str]]:
    """For a runner's call (known_apis.CLI_RUNNERS): its argument and what it runs."""
    where = CLI_RUNNERS.get(qualname) if qualname else None
    if where is None:
        return None, []
    given = arg(node, *where)
    return given, list(dict.fromkeys(components(index, given, node)))  # (two names for one function: one arm)


def one_of(arms: list[tuple[ir.Stmt, ...]]) -> tuple[ir.Stmt, ...]:
    """One of `arms`, on conditions the run cannot know: the last arm needs no test of its own."""
    if len(arms) <= 1:
        return arms[0] if arms else ()
    return (ir.Branch(ir.UNKNOWN, arms[0], one_of(arms[1:])),)


def command_call(qualname: str, ref: int) -> ir.Call:
    return ir.Call(ref, qualname, None, None, (), FROM_COMMAND_LINE)


def app_body(app: App, ref) -> tuple[ir.Stmt, ...]:
    """What calling `app` runs after its own callback's body: the registered callbacks, then one
    command. `ref(node)`: the lowering's ref for a node (a group's calls ref its def, inside the
    function; an app object's, each its registration)."""
    at = (lambda node: ref(app.node)) if app.group else ref
    callbacks = tuple(command_call(q, at(node)) for q, node in app.callbacks)
    arms = []
    for names, node in app.commands:
        where = at(node)
        arms.append(tuple(command_call(q, where) for q in names))
    return (*callbacks, *one_of(arms))


def app_functions(apps: Apps, ref, functions: dict) -> dict[str, ir.FunctionIR]:
    """The functions standing for the module's app objects (a name no `def` of the module has)."""
    return {
        name: ir.FunctionIR(name, ref(app.node), (), {}, app_body(app, ref))
        for name, app in apps.apps.items() if not app.group and name not in functions
    }
