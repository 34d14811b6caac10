"""The nondeterministic-op catalogue (package data ``ops.toml``) and its typed loader.

    >>> cat = load_catalog()
    >>> [e.id for e in cat.entries_for_api("torch.Tensor.put_", (2, 13))]
    ['put_no_accumulate', 'put_accumulate_cuda', 'put_accumulate_cpu']

Never imports torch. See the header of ``ops.toml`` for the meaning of every field.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import textwrap
from dataclasses import dataclass
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = [
    "ApiRecord",
    "Catalog",
    "DocstringExclusion",
    "DocstringInfo",
    "NotFlagged",
    "OpEntry",
    "Predicate",
    "SpecialEntry",
    "Version",
    "format_catalog",
    "load_catalog",
    "parse_catalog",
    "parse_version",
]

Version = tuple[int, int]

_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)")


def parse_version(text: str) -> Version:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; also ``"2.10"``, ``"2.11.0a0+git1234"``."""
    m = _VERSION.match(text)
    if not m:
        raise ValueError(f"not a torch version: {text!r}")
    return int(m.group(1)), int(m.group(2))


def _opt_version(raw: dict, key: str) -> Version | None:
    return parse_version(raw[key]) if key in raw else None


def _in_range(version: Version | None, since: Version | None, until: Version | None) -> bool:
    if version is None:
        return True
    return (since is None or since <= version) and (until is None or version < until)


# ----------------------------------------------------------------------------- predicates

_ARG_TESTS = {"equals", "not_equals", "in", "present", "len", "type", "all_ones", "not_all_ones", "layout"}
_ARG_MODIFIERS = {"pos", "keyword_only", "default"}
_CONTEXT_KEYS = {
    "requires_grad", "device", "input_ndim", "input_ndim_min", "input_dtype", "input_layout",
    "target_kind", "index_kind", "det_mode_at_forward", "det_mode_at_backward", "torchscript",
    "cudnn_ctc_path",
}  # fmt: skip
_NO_DEFAULT = object()


@dataclass(frozen=True)
class Predicate:
    """One condition of a ``when`` list (all must hold).

    subject "arg" / "ctor_arg": a call / constructor argument ``name`` tested with ``test``
    against ``value`` (``pos``, ``keyword_only`` and ``default`` say how to find it).
    subject "context": ``name`` is a context key (device, requires_grad, input_ndim, ...),
    ``test`` is "equals", "in" (a list value) or "min" (``input_ndim_min``).
    """

    subject: str
    name: str
    test: str
    value: Any
    pos: int | None = None
    keyword_only: bool = False
    default: Any = _NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    @classmethod
    def from_toml(cls, raw: dict) -> Predicate:
        for subject in ("arg", "ctor_arg"):
            if subject in raw:
                tests = set(raw) & _ARG_TESTS
                unknown = set(raw) - _ARG_TESTS - _ARG_MODIFIERS - {subject}
                if len(tests) != 1 or unknown:
                    raise ValueError(f"bad {subject} predicate: {raw}")
                (test,) = tests
                value = raw[test]
                return cls(subject, raw[subject], test, tuple(value) if isinstance(value, list) else value,
                           raw.get("pos"), raw.get("keyword_only", False), raw.get("default", _NO_DEFAULT))  # fmt: skip
        if len(raw) != 1 or not set(raw) <= _CONTEXT_KEYS:
            raise ValueError(f"bad context predicate: {raw}")
        ((key, value),) = raw.items()
        if key == "input_ndim_min":
            return cls("context", "input_ndim", "min", value)
        if isinstance(value, list):
            return cls("context", key, "in", tuple(value))
        return cls("context", key, "equals", value)

    def describe(self) -> str:
        """Short text for tables: ``mode='area'``, ``weights given``, ``input_ndim >= 3``."""
        if self.subject == "context":
            sym = {"equals": "=", "in": " in ", "min": " >= "}[self.test]
            return f"{self.name}{sym}{_show(self.value)}"
        if self.test == "present":
            text = f"{self.name} {'given' if self.value else 'not given'}"
        elif self.test in ("all_ones", "not_all_ones"):
            text = f"{self.name} {'all ones' if self.test == 'all_ones' else 'not all ones'}"
        else:
            sym = {"equals": "=", "not_equals": "!=", "in": " in ", "len": " of length ",
                   "type": " is a ", "layout": " layout "}[self.test]  # fmt: skip
            text = f"{self.name}{sym}{_show(self.value)}"
        return text + (" (constructor)" if self.subject == "ctor_arg" else "")


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


def _predicates(raw: list[dict] | None) -> tuple[Predicate, ...]:
    return tuple(Predicate.from_toml(p) for p in raw or ())


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ApiRecord:
    """A public API (qualified name) that reaches an entry, under ``when``."""

    name: str  # "torch.nn.functional.interpolate", "torch.Tensor.index_add_", "torch.nn.ReflectionPad1d"
    kind: str  # "function" | "method" | "module"
    entry_id: str  # the [ops.*] / [not_flagged.*] table it belongs to
    when: tuple[Predicate, ...] = ()
    since: Version | None = None
    until: Version | None = None
    report: bool = True
    report_note: str = ""
    note: str = ""

    def holds_in(self, version: Version | None) -> bool:
        return _in_range(version, self.since, self.until)

    @classmethod
    def from_toml(cls, raw: dict, entry_id: str) -> ApiRecord:
        if raw["kind"] not in ("function", "method", "module"):
            raise ValueError(f"{entry_id}: bad api kind {raw['kind']!r}")
        return cls(raw["name"], raw["kind"], entry_id, _predicates(raw.get("when")),
                   _opt_version(raw, "since"), _opt_version(raw, "until"),
                   raw.get("report", True), raw.get("report_note", ""), raw.get("note", ""))  # fmt: skip


@dataclass(frozen=True)
class DocstringInfo:
    status: str
    section: str  # the docstring list its bullets belong to (= the entry's deterministic_mode)
    bullets: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class OpEntry:
    """One ``[ops.<id>]`` kernel family."""

    id: str
    rule: str  # "TRP401" | "TRP402"
    deterministic_mode: str  # "throws" | "deterministic_alternative"
    device: str  # "cuda" | "cpu" | "any"
    phases: tuple[str, ...]
    kernels: tuple[str, ...]
    condition: str
    when: tuple[Predicate, ...]
    apis: tuple[ApiRecord, ...]
    docstring: DocstringInfo
    verified: dict[str, str]
    report: bool = True
    report_note: str = ""
    since: Version | None = None
    until: Version | None = None
    history: str = ""
    alert_text: tuple[str, ...] = ()
    note: str = ""
    cases: tuple[str, ...] = ()
    source: tuple[dict, ...] = ()

    @property
    def raises(self) -> bool:
        return self.deterministic_mode == "throws"

    @property
    def applies_on_cpu(self) -> bool:
        return self.device in ("cpu", "any")

    @property
    def error_texts(self) -> tuple[str, ...]:
        """Substrings of which one appears in the RuntimeError (throws entries)."""
        return self.alert_text or self.kernels

    def holds_in(self, version: Version | None) -> bool:
        return _in_range(version, self.since, self.until)

    def apis_for(self, version: Version | None = None) -> list[ApiRecord]:
        if not self.holds_in(version):
            return []
        return [a for a in self.apis if a.holds_in(version)]


@dataclass(frozen=True)
class NotFlagged:
    """One ``[not_flagged.<id>]``: APIs (under ``when``) that must not be reported."""

    id: str
    reason: str
    apis: tuple[ApiRecord, ...]
    since: Version | None = None
    until: Version | None = None
    verified: dict[str, str] | None = None
    cases: tuple[str, ...] = ()

    def holds_in(self, version: Version | None) -> bool:
        return _in_range(version, self.since, self.until)


@dataclass(frozen=True)
class SpecialEntry:
    """``[compile.<id>]`` / ``[environment.<id>]``: effects that are not one op call."""

    id: str
    table: str  # "compile" | "environment"
    deterministic_mode: str
    device: str
    condition: str
    apis: tuple[str, ...]
    rule: str = ""
    since: Version | None = None
    until: Version | None = None
    raw: dict | None = None

    def holds_in(self, version: Version | None) -> bool:
        return _in_range(version, self.since, self.until)


@dataclass(frozen=True)
class DocstringExclusion:
    id: str
    section: str  # "deterministic_alternative" | "throws"
    bullet: str  # normalized bullet text (see catalog.docstring.normalize)
    kind: str  # "stale" | "overbroad"
    reason: str
    see: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- catalogue


def _op_entry(eid: str, raw: dict) -> OpEntry:
    mode = raw["deterministic_mode"]
    expected_rule = {"throws": "TRP402", "deterministic_alternative": "TRP401"}[mode]
    if raw["rule"] != expected_rule:
        raise ValueError(f"ops.{eid}: rule {raw['rule']} does not match {mode}")
    doc = raw.get("docstring", {})
    return OpEntry(
        id=eid,
        rule=raw["rule"],
        deterministic_mode=mode,
        device=raw["device"],
        phases=tuple(raw["phases"]),
        kernels=tuple(raw["kernels"]),
        condition=raw["condition"],
        when=_predicates(raw.get("when")),
        apis=tuple(ApiRecord.from_toml(a, eid) for a in raw.get("api", ())),
        docstring=DocstringInfo(doc.get("status", "missing"), mode, tuple(doc.get("bullets", ())), doc.get("note", "")),
        verified=dict(raw.get("verified", {})),
        report=raw.get("report", True),
        report_note=raw.get("report_note", ""),
        since=_opt_version(raw, "since"),
        until=_opt_version(raw, "until"),
        history=raw.get("history", ""),
        alert_text=tuple(raw.get("alert_text", ())),
        note=raw.get("note", ""),
        cases=tuple(raw.get("cases", ())),
        source=tuple(raw.get("source", ())),
    )


@dataclass(frozen=True)
class Catalog:
    meta: dict[str, Any]
    entries: tuple[OpEntry, ...]
    not_flagged: tuple[NotFlagged, ...]
    special: tuple[SpecialEntry, ...]
    docstring_exclusions: tuple[DocstringExclusion, ...]

    def entry(self, entry_id: str) -> OpEntry:
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)

    def entries_for(self, torch_version: Version | None = None, *, rule: str | None = None) -> list[OpEntry]:
        """Entries that hold in ``torch_version`` (None: every entry), optionally for one rule."""
        return [e for e in self.entries if e.holds_in(torch_version) and (rule is None or e.rule == rule)]

    def apis_for(self, name: str, torch_version: Version | None = None, *, rule: str | None = None) -> list[ApiRecord]:
        """The API records named ``name`` (qualified) of the entries that hold in ``torch_version``."""
        entries = self.entries_for(torch_version, rule=rule)
        return [a for e in entries for a in e.apis_for(torch_version) if a.name == name]

    def entries_for_api(self, name: str, torch_version: Version | None = None) -> list[OpEntry]:
        ids = {a.entry_id for a in self.apis_for(name, torch_version)}
        return [e for e in self.entries if e.id in ids]

    def not_flagged_for(self, name: str, torch_version: Version | None = None) -> list[ApiRecord]:
        """Trap records (``[not_flagged]``) for the API ``name``."""
        return [a for n in self.not_flagged if n.holds_in(torch_version) for a in n.apis
                if a.name == name and a.holds_in(torch_version)]  # fmt: skip

    def api_names(self, *, include_not_flagged: bool = True) -> set[str]:
        names = {a.name for e in self.entries for a in e.apis}
        if include_not_flagged:
            names |= {a.name for n in self.not_flagged for a in n.apis}
        return names


def parse_catalog(text: str) -> Catalog:
    """Parse (and validate) catalogue TOML text."""
    raw = tomllib.loads(text)
    if raw.get("schema_version") != 1:
        raise ValueError(f"unsupported catalogue schema_version {raw.get('schema_version')!r}")
    entries = tuple(_op_entry(k, v) for k, v in raw.get("ops", {}).items())
    not_flagged = tuple(
        NotFlagged(k, v["reason"], tuple(ApiRecord.from_toml(a, k) for a in v.get("api", ())),
                   _opt_version(v, "since"), _opt_version(v, "until"), v.get("verified"), tuple(v.get("cases", ())))
        for k, v in raw.get("not_flagged", {}).items()
    )  # fmt: skip
    special = tuple(
        SpecialEntry(k, table, v["deterministic_mode"], v["device"], v["condition"], tuple(v.get("apis", ())),
                     v.get("rule", ""), _opt_version(v, "since"), _opt_version(v, "until"), v)
        for table in ("compile", "environment")
        for k, v in raw.get(table, {}).items()
    )  # fmt: skip
    exclusions = tuple(
        DocstringExclusion(k, v["section"], v["bullet"], v["kind"], v["reason"], tuple(v.get("see", ())))
        for k, v in raw.get("docstring_exclusions", {}).items()
    )
    return Catalog(raw.get("meta", {}), entries, not_flagged, special, exclusions)


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The packaged catalogue, parsed once per process."""
    text = importlib.resources.files("torchrepro_lint.catalog").joinpath("ops.toml").read_text(encoding="utf-8")
    return parse_catalog(text)


# ----------------------------------------------------------------------------- rendering


def _api_line(api: ApiRecord) -> str:
    cond = " and ".join(p.describe() for p in api.when)
    return api.name + (f" [{cond}]" if cond else "") + ("" if api.report else " (not reported)")


def format_catalog(torch_version: Version | str | None = None, width: int = 100) -> str:
    """Human-readable table of the catalogue as it applies to ``torch_version``."""
    cat = load_catalog()
    if isinstance(torch_version, str):
        torch_version = parse_version(torch_version)
    shown = "all versions" if torch_version is None else "torch %d.%d" % torch_version
    meta = cat.meta
    lines = [
        f"torchrepro-lint op catalogue for {shown}",
        f"facts from torch {meta.get('torch_version')}; "
        f"releases checked: {', '.join(meta.get('releases_checked', []))}",
        f"verified on CPU: {meta.get('verified_cpu')}",
        f"verified on CUDA: {meta.get('verified_cuda')}",
    ]
    wrap = functools.partial(textwrap.wrap, width=width, initial_indent="      ", subsequent_indent="        ")
    titles = {
        "TRP402": "TRP402 op-without-deterministic-impl: raises RuntimeError in deterministic mode",
        "TRP401": "TRP401 nondeterministic-op: switches to a deterministic algorithm in deterministic mode",
    }
    for rule, title in titles.items():
        entries = cat.entries_for(torch_version, rule=rule)
        lines += ["", title, "-" * min(width, len(title))]
        lines.append(f"  {'id':34} {'device':6} {'phase':17} since  until  reported")
        for e in entries:
            since = "%d.%d" % e.since if e.since else "-"
            until = "%d.%d" % e.until if e.until else "-"
            lines.append(f"  {e.id:34} {e.device:6} {'+'.join(e.phases):17} {since:6} {until:6} "
                         f"{'yes' if e.report else 'no'}")  # fmt: skip
            conds = [p.describe() for p in e.when]
            if conds:
                lines.extend(wrap("when: " + " and ".join(conds)))
            for api in e.apis_for(torch_version):
                lines.extend(wrap(_api_line(api)))
    lines += ["", "Not flagged (look-alikes that do not raise)", "-" * 43]
    for n in cat.not_flagged:
        if n.holds_in(torch_version):
            lines.append(f"  {n.id}")
            for api in n.apis:
                lines.extend(wrap(_api_line(api)))
    gated = [e.id for e in cat.entries if not e.holds_in(torch_version)]
    if gated:
        lines += ["", "Not in effect in this version: " + ", ".join(gated)]
    return "\n".join(lines) + "\n"
