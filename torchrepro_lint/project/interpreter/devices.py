"""Device tests left to the run (ir.AttributeOnCuda): whether an attribute names a CUDA device
where its value is decided in another module or outside its class.

The lowering sums each class up (ir.ClassIR.devices, from extract/attributes.py); here a read
is decided from that summary, the construction's arguments the reading module saw, and what
the program stored on the object (`trainer.device = "cuda"`, tracked in the frame as the
dotted name and handed to the object's methods as `self.device`).
"""

from __future__ import annotations

from torchrepro_lint.project import ir
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import Symbol


def attribute_on_cuda(project: ProjectIndex, test: ir.AttributeOnCuda, frame) -> bool:
    if test.owner is not None:
        stored = frame.env.get(f"{test.owner}.{test.attribute}")
        if isinstance(stored, ir.Const):  # stored on the object after it was built: it stands
            return bool(stored.value)
    if test.known:
        return True
    klass = project.resolve(test.klass, frame.module) if test.klass is not None else frame.self_class
    if klass is None or klass.klass is None:
        return False
    sources = _sources(project, klass, test.attribute)
    return sources is not None and holds_cuda(sources, test.given, test.instance)


def holds_cuda(sources: tuple[ir.DeviceSource, ...], given, instance: bool) -> bool:
    """The sources in order, each replaced by the construction's argument where one is given;
    a plain literal that always runs replaces every value before it (attributes.attribute_values
    does the same within one module)."""
    by_key = {key: (on_cuda, literal) for key, on_cuda, literal in given} if given is not None else None
    ordered: list[tuple[bool, bool]] = []
    for source in sources:
        if not instance and not source.on_class:
            continue  # read on the class: only its body's default
        argument = None
        if by_key is not None and source.keyword is not None:
            argument = by_key.get(source.keyword) or (by_key.get(source.position) if source.position is not None else None)
        if argument is not None:
            on_cuda, literal = argument
            ordered.append((on_cuda, source.unconditional and literal))
        elif source.keyword is not None and not source.on_class and by_key is None:
            ordered.append((False, False))  # an `__init__` parameter of a construction not in view
        else:
            ordered.append((source.on_cuda, source.replaces))
    last_replacing = max((i for i, (_, replaces) in enumerate(ordered) if replaces), default=0)
    return any(on_cuda for on_cuda, _ in ordered[last_replacing:])


def _sources(project: ProjectIndex, klass: Symbol, attribute: str) -> tuple[ir.DeviceSource, ...] | None:
    """The summary of the first class along the project part of the method resolution order
    that has the attribute."""
    for current in project.lineage(klass):
        for name, sources in current.klass.devices:
            if name == attribute:
                return sources
    return None
