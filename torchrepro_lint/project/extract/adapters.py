"""Whether a PEFT adapter config, as the code shows it, makes adapter initialisation draw from
torch's global generator (known_apis.py has the configs that were read in PEFT's source).

LoRA's default draws its A matrices (kaiming); inits computed from the base weights (PiSSA,
OLoRA, ...) or from data (EVA, CorDA, LoftQ) do not. A config the code does not show (a
parameter, a function's result, `**kwargs`) is taken to be LoRA's default: it draws; an init the
code takes from its configuration is not. A PEFT method whose initialisation was not read (VeRA,
LoHa, prompt tuning, ...) is not modelled: no draw. Whether the draw matters (only training
starts from it) is for the rules to say (programs.torch_randomness, TRP105).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.literals import MISSING, is_none, literal_value
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.project.known_apis import (
    LORA_INITS_WITHOUT_DRAW,
    PEFT_ALWAYS_DRAWS,
    PEFT_INIT_SWITCHES,
    PEFT_LORA_CONFIGS,
    PEFT_PREFIX_TUNING_CONFIGS,
    PEFT_PROMPT_TUNING_CONFIGS,
)


def config_draws(index: ModuleIndex, expr: cst.BaseExpression | None, at: cst.CSTNode, depth: int = 0) -> bool:
    """Whether adapters built from the config `expr` (None: no config given) draw at random."""
    if expr is None or is_none(expr):
        return False
    if depth > 3:
        return True
    if isinstance(expr, cst.Name):
        assigned = index.assigned_value(expr.value, at)
        if assigned is None or assigned is expr:
            return True  # a parameter or a name bound some other way: unknown
        return config_draws(index, assigned, at, depth + 1)
    if isinstance(expr, cst.IfExp):  # `LoraConfig(...) if args.use_peft else None`
        return config_draws(index, expr.body, at, depth + 1) or config_draws(index, expr.orelse, at, depth + 1)
    if not isinstance(expr, cst.Call):
        return True
    config = index.resolve(expr.func, at)
    if config in PEFT_LORA_CONFIGS:
        return _lora_init_draws(expr)
    if config in PEFT_INIT_SWITCHES:
        init = _keyword_or_unknown(expr, PEFT_INIT_SWITCHES[config])
        return init is not MISSING and init is not True
    if config in PEFT_ALWAYS_DRAWS:
        return True
    if config in PEFT_PROMPT_TUNING_CONFIGS:
        return _prompt_init_draws(index, expr)
    if config in PEFT_PREFIX_TUNING_CONFIGS:
        zeroed = _keyword_or_unknown(expr, "init_weights") == "zero"
        return not zeroed or _keyword_or_unknown(expr, "prefix_projection") not in (MISSING, False)
    if config is not None and config.startswith("peft.") and config.endswith("Config"):
        return False  # a PEFT method whose initialisation is not modelled
    return True  # built by a function of the project or a config loader: unknown


_UNKNOWN = object()


def _keyword_or_unknown(call: cst.Call, keyword: str):
    """The literal value of `keyword=`; MISSING when absent (and no `**` may hold it); _UNKNOWN else."""
    value = _arg(call, None, keyword)
    if value is None:
        return _UNKNOWN if any(a.star == "**" for a in call.args) else MISSING
    literal = literal_value(value, _UNKNOWN)
    return literal


def _lora_init_draws(call: cst.Call) -> bool:
    """LoraLayer.update_layer: which `init_lora_weights` leave random numbers in A or B.
    An init the code takes from configuration (`init_lora_weights=args.init`) is one the author
    chose, not LoRA's default: PEFT's own examples that do so default to OLoRA or PiSSA, which
    do not draw. It is not taken to draw; literal arms of a conditional are read."""
    value = _arg(call, None, "init_lora_weights")
    if isinstance(value, cst.IfExp):
        return any(_lora_value_draws(literal_value(arm, _UNKNOWN)) for arm in (value.body, value.orelse))
    init = _keyword_or_unknown(call, "init_lora_weights")
    if init is MISSING:
        return True  # the default, True: kaiming A
    if init is _UNKNOWN:
        return value is None  # only `**kwargs` may hold it: the default is the likely value
    return _lora_value_draws(init)


def _prompt_init_draws(index: ModuleIndex, call: cst.Call) -> bool:
    """PromptTuningConfig's `prompt_tuning_init`: RANDOM (the default) and SAMPLE_VOCAB draw, TEXT
    does not; one taken from configuration is the author's choice, as for LoRA: not taken to draw."""
    value = _arg(call, None, "prompt_tuning_init")
    if value is None:
        return not any(a.star == "**" for a in call.args)
    init = literal_value(value, _UNKNOWN)
    if init is _UNKNOWN and isinstance(value, (cst.Name, cst.Attribute)):
        init = (index.resolve(value, call) or "").rsplit(".", 1)[-1]  # PromptTuningInit.TEXT
        if not init.isupper():
            return False
    return not isinstance(init, str) or init.upper() != "TEXT"


def _lora_value_draws(init) -> bool:
    if init is _UNKNOWN:
        return False
    if not isinstance(init, str):
        return True  # True, False, or a value PEFT does not know
    name = init.lower()
    if name.startswith("pissa_niter_"):
        return True  # randomized low-rank SVD (torch.svd_lowrank draws its test matrix)
    return not name.startswith(LORA_INITS_WITHOUT_DRAW)


def config_shown(index: ModuleIndex, expr: cst.BaseExpression | None, at: cst.CSTNode, depth: int = 0) -> bool:
    """Whether the code shows the adapter config itself: a PEFT config's construction, or a
    variable bound to one. Not a parameter, a function's result (TRL's
    `get_peft_config(model_args)` is None unless the run asks for PEFT) or `config if flag else
    None`: whether there is an adapter at all is then decided at run time."""
    if isinstance(expr, cst.Name) and depth <= 3:
        assigned = index.assigned_value(expr.value, at)
        return assigned is not None and assigned is not expr and config_shown(index, assigned, at, depth + 1)
    if isinstance(expr, cst.Call):
        config = index.resolve(expr.func, at)
        return config is not None and config.startswith("peft.") and config.endswith("Config")
    return False


def adapter_call_draws(index: ModuleIndex, call: cst.Call, position: int, keyword: str) -> bool:
    """`get_peft_model(model, config)` and the like: whether the adapters it adds draw.
    `low_cpu_mem_usage=True` creates them empty on the meta device, for weights loaded later."""
    if literal_value(_arg(call, None, "low_cpu_mem_usage"), None) is True:
        return False
    config = _arg(call, position, keyword)
    if config is None:
        return False
    return config_draws(index, config, call)


# `add_adapter`'s config: transformers' and diffusers' PeftAdapterMixin.add_adapter(adapter_config,
# adapter_name) (integrations/peft.py; loaders/peft.py), PEFT's PeftModel.add_adapter(adapter_name,
# peft_config, low_cpu_mem_usage=False) (peft_model.py): each calls inject_adapter_in_model.
ADD_ADAPTER_KEYWORDS = ("adapter_config", "peft_config")


def add_adapter_draws(index: ModuleIndex, call: cst.Call) -> bool:
    """`model.add_adapter(config)`, a method recognised by name: whether it adds PEFT adapters
    that draw. Only where the code shows a PEFT config (other libraries' `add_adapter`, such as
    AdapterHub's `add_adapter("name", config="seq_bn")` or a project's own, take other values)."""
    if literal_value(_arg(call, None, "low_cpu_mem_usage"), None) is True:
        return False
    candidates = [_arg(call, None, keyword) for keyword in ADD_ADAPTER_KEYWORDS]
    candidates += [a.value for a in call.args[:2] if a.keyword is None and not a.star]
    return any(
        value is not None and config_shown(index, value, call) and config_draws(index, value, call)
        for value in candidates
    )
