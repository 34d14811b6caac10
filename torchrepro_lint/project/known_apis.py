"""Facts about external APIs: which calls seed, claim determinism, draw randomness, use CUDA.

Every name here is a canonical qualified name (see analysis/names.py). Kept as data so the
next engineer can audit one table instead of reading visitor code.
"""

from __future__ import annotations

from dataclasses import dataclass


class Kind:
    SEED_TORCH = "seed_torch"
    SEED_CUDA = "seed_cuda"  # torch.cuda.manual_seed(_all): CPU generator left alone
    SEED_RANDOM = "seed_random"
    SEED_NUMPY = "seed_numpy"
    CLAIM = "claim"  # claims determinism (cudnn.deterministic = True, Trainer(deterministic=True))
    DET_MODE = "det_mode"  # enables deterministic mode (use_deterministic_algorithms(True))
    DET_MODE_WARN = "det_mode_warn"  # the same with warn_only / debug mode "warn"
    CUDNN_DETERMINISTIC = "cudnn_deterministic"  # the user's own `cudnn.deterministic = v`
    BENCHMARK = "benchmark"  # cudnn.benchmark = v
    DRAW = "draw"  # draws from torch's global generator now
    MODULE_INIT = "module_init"  # builds parameters with random init
    RANDOMNESS = "randomness"  # will draw later (shuffling loader, random transform, dropout)
    DRAW_RANDOM = "draw_random"  # Python's `random` global generator
    DRAW_NUMPY = "draw_numpy"  # NumPy's global generator
    CUDA = "cuda"
    ENV_SET = "env_set"  # detail: (variable name,)
    CHECKPOINT = "checkpoint"  # weights loaded from a checkpoint
    TRAINING = "training"  # gradients or optimisers: the program trains
    SPAWN_METHOD = "spawn_method"
    EXPORT = "export"  # writes an exported model (ONNX, TorchScript, torch.export)  # multiprocessing start method set to "spawn"
    # TRP108 (resumed runs): an optimizer's state restored from a checkpoint (detail ("trains",):
    # the same call trains on, Lightning's `fit(ckpt_path=...)`); an RNG state restored (or a
    # framework resume that restores them); an optimizer stepped; and, added by the interpreter
    # at the restore's site, a resume that training continued from with no RNG state restored.
    OPTIMIZER_RESTORE = "optimizer_restore"
    RNG_RESTORE = "rng_restore"
    OPTIMIZER_STEP = "optimizer_step"
    RESUMED_WITHOUT_RNG = "resumed_without_rng"
    RESUMED_WITH_RNG = "resumed_with_rng"  # TRP108: a restore whose RNG state is restored on this path
    # TRP207 (compiled-kernel autotuning): a tuner turned on (detail: (source, knob), see
    # extract/autotune.py), and Inductor's own `deterministic` flag set without deterministic
    # mode (for the message: Dynamo resets it after tracing a frame).
    AUTOTUNE = "autotune"
    INDUCTOR_DETERMINISTIC = "inductor_deterministic"
    # A `with` block that builds modules sparing their init (detail: (strength,), see
    # EMPTY_INIT_*), entered, and left (detail: ()): the interpreter's PathState.empty_init.
    EMPTY_INIT = "empty_init"


TORCH_DRAWS = frozenset(
    "torch." + n
    for n in (
        "rand randn randint randperm rand_like randn_like randint_like normal bernoulli "
        "multinomial poisson nn.functional.dropout nn.functional.dropout1d nn.functional.dropout2d "
        "nn.functional.dropout3d nn.functional.alpha_dropout nn.functional.feature_alpha_dropout "
        "nn.functional.gumbel_softmax nn.functional.rrelu utils.data.random_split "
        "nn.init.uniform_ nn.init.normal_ nn.init.xavier_uniform_ nn.init.xavier_normal_ "
        "nn.init.kaiming_uniform_ nn.init.kaiming_normal_ nn.init.trunc_normal_ "
        "nn.init.orthogonal_ nn.init.sparse_"
    ).split()
)

# In-place random fills: distinctive method names, recognised on any receiver.
TENSOR_RANDOM_METHODS = frozenset(
    "uniform_ normal_ random_ bernoulli_ exponential_ geometric_ log_normal_ cauchy_".split()
)

# nn modules whose constructor draws random initial weights (norm layers init to constants).
RANDOM_INIT_MODULES = frozenset(
    "torch.nn." + n
    for n in (
        "Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d "
        "ConvTranspose3d LazyConv1d LazyConv2d LazyConv3d Embedding EmbeddingBag RNN LSTM GRU "
        "RNNCell LSTMCell GRUCell MultiheadAttention Transformer TransformerEncoderLayer "
        "TransformerDecoderLayer"
    ).split()
)
MODEL_FACTORIES = frozenset({"timm.create_model"})
MODEL_FACTORY_PREFIXES = ("torchvision.models.",)

# Constructed now, draw later (at iteration or in training forward).
DEFERRED_RANDOMNESS = frozenset(
    {
        "torch.utils.data.RandomSampler",
        "torch.utils.data.SubsetRandomSampler",
        "torch.utils.data.WeightedRandomSampler",
        "torch.nn.Dropout",
        "torch.nn.Dropout1d",
        "torch.nn.Dropout2d",
        "torch.nn.Dropout3d",
        "torch.nn.AlphaDropout",
        "torch.nn.FeatureAlphaDropout",
    }
)
# RANDOMNESS detail of a dropout module (of those above): it draws only in a training-mode forward
DROPOUT = ("dropout",)
DROPOUT_MODULES = frozenset(name for name in DEFERRED_RANDOMNESS if "Dropout" in name)
RANDOM_TRANSFORM_PREFIXES = ("torchvision.transforms.", "torchvision.transforms.v2.")
RANDOM_TRANSFORMS = frozenset(
    "ColorJitter RandAugment AutoAugment TrivialAugmentWide AugMix GaussianBlur ElasticTransform".split()
)

PY_RANDOM_DRAWS = frozenset(
    "random." + n
    for n in (
        "random randint randrange choice choices shuffle sample uniform gauss normalvariate "
        "lognormvariate expovariate vonmisesvariate gammavariate betavariate paretovariate "
        "weibullvariate triangular getrandbits randbytes binomialvariate"
    ).split()
)
NUMPY_NOT_DRAWS = frozenset(
    "seed default_rng RandomState Generator SeedSequence get_state set_state PCG64 PCG64DXSM "
    "MT19937 Philox SFC64 BitGenerator".split()
)

CUDA_CALLS = frozenset(
    {
        "torch.cuda.set_device",
        "torch.cuda.synchronize",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.GradScaler",
        "torch.nn.DataParallel",
    }
)
# Device evidence from today's device-generic APIs. Each entry: where the device is read from
# ("always", or the argument (position, keyword) that must name CUDA / the accelerator).
# Checks that only ask (torch.accelerator.is_available(), device_count()) are not evidence by
# themselves: they count only where they choose a device (`x if torch.accelerator.is_available()
# else "cpu"`), like torch.cuda.is_available().
ACCELERATOR_CALLS = frozenset(
    {"torch.accelerator.set_device_index", "torch.accelerator.set_device_idx", "torch.accelerator.device_index"}
)
ACCELERATOR_DEVICE = "torch.accelerator.current_accelerator"  # a device: evidence where it is kept or used
DEVICE_PROBES = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
# Calls whose device argument decides whether they put work on CUDA: (position, keyword, default).
DEVICE_ARGUMENT_CALLS: dict[str, tuple[int | None, str, str | None]] = {
    "torch.autocast": (0, "device_type", None),
    "torch.amp.autocast": (0, "device_type", None),
    "torch.amp.autocast_mode.autocast": (0, "device_type", None),
    "torch.amp.GradScaler": (0, "device", "cuda"),  # torch.amp.GradScaler(device="cuda", ...)
    "torch.amp.grad_scaler.GradScaler": (0, "device", "cuda"),
    "torch.set_default_device": (0, "device", None),
}
CHECKPOINT_CALLS = frozenset(
    {"torch.load", "torch.jit.load", "torch.hub.load_state_dict_from_url", "safetensors.torch.load_file"}
)
# (`load_raw`: Lightning Fabric's `obj.load_state_dict(torch.load(path))` for any strategy, fabric.py Fabric.load_raw)
CHECKPOINT_METHODS = frozenset({"load_state_dict", "load_checkpoint", "load_from_checkpoint", "load_raw"})
TRAINING_METHODS = frozenset({"backward"})
# TRP108: calls that restore a global RNG's state, and methods that restore an RNG object's
# (`torch.Generator.set_state`, NumPy's `RandomState.set_state`, `random.Random.setstate`;
# `xm.set_rng_state`, a device module reached through an alias), on any receiver.
RNG_RESTORE_CALLS = frozenset(
    {
        "torch.set_rng_state", "torch.random.set_rng_state",
        *(f"torch.{device}.{name}" for device in ("cuda", "cuda.random", "xpu", "mps", "npu")
          for name in ("set_rng_state", "set_rng_state_all")),
        "numpy.random.set_state", "random.setstate",
    }
)
RNG_RESTORE_METHODS = frozenset({"set_rng_state", "set_rng_state_all", "set_state", "setstate", "__setstate__"})

SPAWN_FUNCTIONS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
LIGHTNING_TRAINER = "lightning.Trainer"
LIGHTNING_FABRIC = frozenset({"lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric"})
# `<receiver>.seed_everything(...)` where the receiver is not in view: taken as Fabric's method
FABRIC_SEED_EVERYTHING = "lightning.Fabric.seed_everything"
HF_TRAINING_ARGUMENTS = frozenset({"transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments"})
CUDNN = "torch.backends.cudnn"

# TRP207: compiled-kernel autotuning, read in torch 2.13.0 (and the same in 2.14.1).
# `torch.compile(mode=...)` turns these modes into config patches (_inductor/__init__.py,
# list_mode_options): both set `max_autotune` and `coordinate_descent_tuning`.
INDUCTOR_CONFIG = "torch._inductor.config"
COMPILE_CALLS = frozenset({"torch.compile"})
AUTOTUNE_MODES = frozenset({"max-autotune", "max-autotune-no-cudagraphs"})
# The switches that choose kernels by timing them in a way that changes results
# (_inductor/config.py, with the variables it reads when it is imported):
# `max_autotune` / `max_autotune_gemm`: matmul and convolution templates chosen by timing
# (select_algorithm.py, `config.max_autotune or config.max_autotune_gemm`); coordinate descent:
# reductions' block sizes and warps retuned by timing (runtime/triton_heuristics.py).
# `max_autotune_pointwise` is not one: pointwise block sizes do not change results, and the
# reduction configs it adds are timed in every mode (see the rule's decisions).
AUTOTUNE_SWITCHES = {
    "max_autotune": "TORCHINDUCTOR_MAX_AUTOTUNE",
    "max_autotune_gemm": "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM",
    "coordinate_descent_tuning": "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING",
}
INDUCTOR_DETERMINISTIC_SWITCH = ("deterministic", "TORCHINDUCTOR_DETERMINISTIC")


@dataclass(frozen=True)
class Helper:
    """A framework seeding helper. `claims_when` names the keyword that turns determinism on."""

    seeds: tuple[str, ...] = ("torch", "random", "numpy")
    claims_when: str | None = None  # keyword name, "always", or None (never)
    claim_position: int | None = None  # positional index of that keyword, when it has one
    enables_det_mode: bool = False  # calls torch.use_deterministic_algorithms(True)
    warn_only: bool = False
    sets_cublas: bool = False
    resets_benchmark: bool = False  # sets cudnn.benchmark = False when it claims determinism
    seed_param: str = "seed"
    random_when_seed_none: bool = False  # seed=None means "draw a random seed"
    seed_text: str | None = None  # where the seed comes from when no argument is the seed (a trainer's)


_LIGHTNING = Helper()
# Hugging Face's Trainer seeds in its constructor, before anything else: `set_seed(args.seed)`
# (random, NumPy, torch, every device), or `enable_full_determinism(args.seed)` when the
# arguments ask for it (modelled where TrainingArguments(full_determinism=...) is built).
# `args.seed` defaults to 42. TRL's trainers are Trainer subclasses whose __init__ calls it.
TRAINER_SEED = "<trainer: args.seed>"  # not code text: seeds passed as `args.seed` are common
_HF_TRAINER = Helper(seed_text=TRAINER_SEED)
# TRL's trainers: Trainer subclasses whose constructor reaches Trainer's (read in trl 1.10:
# trl/trainer/*_trainer.py, trl/experimental/<package>/*_trainer.py through _BaseTrainer; trl 0.15
# exported the experimental ones from `trl` and `trl.trainer`). Name -> (module file, package
# under trl.experimental or None). Each is spelled as every import path reaches it.
_TRL_TRAINERS: dict[str, tuple[str, str | None]] = {
    "SFTTrainer": ("sft_trainer", None), "DPOTrainer": ("dpo_trainer", None),
    "GRPOTrainer": ("grpo_trainer", None), "RewardTrainer": ("reward_trainer", None),
    "KTOTrainer": ("kto_trainer", None), "RLOOTrainer": ("rloo_trainer", None),
    "IterativeSFTTrainer": ("iterative_sft_trainer", None),
    **{name: (f"{package}_trainer", package) for name, package in (
        ("BCOTrainer", "bco"), ("CPOTrainer", "cpo"), ("ORPOTrainer", "orpo"), ("OnlineDPOTrainer", "online_dpo"),
        ("NashMDTrainer", "nash_md"), ("XPOTrainer", "xpo"), ("GKDTrainer", "gkd"), ("GOLDTrainer", "gold"),
        ("PRMTrainer", "prm"), ("TPOTrainer", "tpo"), ("DistillationTrainer", "distillation"),
        ("IWOPDTrainer", "iw_opd"), ("SDFTTrainer", "sdft"), ("SDPOTrainer", "sdpo"), ("SSDTrainer", "ssd"),
        ("MiniLLMTrainer", "minillm"), ("GMPOTrainer", "gmpo"),
        ("GRPOWithReplayBufferTrainer", "grpo_with_replay_buffer"),
    )},
}


def _trl_spellings(names) -> tuple[str, ...]:
    spelled = []
    for name in names:
        module, package = _TRL_TRAINERS[name]
        spelled += [f"trl.{name}", f"trl.trainer.{name}", f"trl.trainer.{module}.{name}"]
        if package is not None:
            spelled += [f"trl.experimental.{package}.{name}", f"trl.experimental.{package}.{module}.{name}"]
    return tuple(spelled)


HF_TRAINERS = (
    "transformers.Trainer",
    "transformers.trainer.Trainer",
    "transformers.Seq2SeqTrainer",
    "transformers.trainer_seq2seq.Seq2SeqTrainer",
    *_trl_spellings(_TRL_TRAINERS),
)
# TRL trainers whose __init__ wraps the model with `get_peft_model(model, peft_config)` before
# it calls Trainer's (which seeds): read in trl/trainer/{sft,dpo,grpo,kto,rloo}_trainer.py and the
# experimental trainers (directly, through experimental/utils.py prepare_peft_model, or through
# the constructor of the trainer they derive from: GKD and GOLD SFT's, NashMD and XPO
# OnlineDPO's, MiniLLM, GMPO and the replay-buffer GRPO GRPO's). RewardTrainer calls
# `set_seed(args.seed)` first, so its adapter is drawn seeded; IterativeSFTTrainer takes no config.
TRAINERS_DRAWING_ADAPTER_FIRST = frozenset(
    _trl_spellings(name for name in _TRL_TRAINERS if name not in ("RewardTrainer", "IterativeSFTTrainer"))
)

# PEFT: calls that add freshly initialised adapter layers to a model: (position, keyword) of the
# config and whether `low_cpu_mem_usage=True` (empty weights on the meta device) is accepted.
PEFT_ADAPTER_CALLS: dict[str, tuple[int, str]] = {
    **{f"peft.{path}get_peft_model": (1, "peft_config") for path in ("", "mapping.", "mapping_func.")},
    "peft.inject_adapter_in_model": (0, "peft_config"),
    "peft.mapping.inject_adapter_in_model": (0, "peft_config"),
    **{
        f"peft.{name}": (1, "peft_config")
        for name in (
            "PeftModel PeftMixedModel PeftModelForCausalLM PeftModelForSeq2SeqLM PeftModelForSequenceClassification "
            "PeftModelForTokenClassification PeftModelForQuestionAnswering PeftModelForFeatureExtraction"
        ).split()
    },
    "peft.LoraModel": (1, "config"),
}
# Adapter configs whose initialisation was read (peft/tuners/*/layer.py). LoRA: `init_lora_weights`
# True (the default: kaiming A), "gaussian", False (nn.Linear's own random init of A and B),
# "orthogonal", "pissa_niter_<n>" and "lora_ga" (torch.svd_lowrank draws) draw; the inits below
# compute A and B from the weights or from data instead.
def _peft_config(name: str, package: str) -> frozenset[str]:
    """A PEFT config class as each import path spells it (`peft`, `peft.tuners`, its package, its module)."""
    return frozenset({f"peft.{name}", f"peft.tuners.{name}", f"peft.tuners.{package}.{name}", f"peft.tuners.{package}.config.{name}"})


PEFT_LORA_CONFIGS = _peft_config("LoraConfig", "lora")
LORA_INITS_WITHOUT_DRAW = ("pissa", "corda", "olora", "mica", "loftq", "eva")  # "pissa_niter_<n>" excepted
PEFT_ALWAYS_DRAWS = frozenset().union(
    _peft_config("AdaLoraConfig", "adalora"),  # randn A, E, B, then normal_ A and B
    # LoHa, LoKr (reset_adapter_parameters, whichever `init_weights`): kaiming_uniform_ factors
    _peft_config("LoHaConfig", "loha"), _peft_config("LoKrConfig", "lokr"),
    # P-tuning's PromptEncoder (p_tuning/model.py): an nn.Embedding and an MLP or LSTM head
    _peft_config("PromptEncoderConfig", "p_tuning"),
)
# Methods whose init draws unless a keyword keeps its default, read in their layer.py: IA3's
# `init_ia3_weights` (True: vectors of ones), OFT's and BOFT's `init_weights` (True: zero
# rotations; False: normal_).
PEFT_INIT_SWITCHES: dict[str, str] = {
    **dict.fromkeys(_peft_config("IA3Config", "ia3"), "init_ia3_weights"),
    **dict.fromkeys(_peft_config("OFTConfig", "oft"), "init_weights"),
    **dict.fromkeys(_peft_config("BOFTConfig", "boft"), "init_weights"),
}
# Prompt tuning (prompt_tuning/model.py PromptEmbedding): `prompt_tuning_init` RANDOM (the default)
# keeps nn.Embedding's random init, SAMPLE_VOCAB draws token ids; TEXT copies the embeddings of a text.
PEFT_PROMPT_TUNING_CONFIGS = _peft_config("PromptTuningConfig", "prompt_tuning")
# Prefix tuning (prefix_tuning/model.py PrefixEncoder): an nn.Embedding, with an MLP under
# `prefix_projection=True`; `init_weights="zero"` zeroes the embedding (without the MLP) or the
# MLP's last layer (with it: the embedding stays random).
PEFT_PREFIX_TUNING_CONFIGS = _peft_config("PrefixTuningConfig", "prefix_tuning")
# MODULE_INIT details of adapter layers initialised at random: by a PEFT call, or by a TRL trainer
# given `peft_config=` before it seeds. Not identifiers, so never the name of a seed's variable
# (the interpreter's trap of a draw whose value becomes the seed).
ADAPTER = ("<adapter>",)
# In a DRAW's detail: the draw makes the run's seed (extract/calls.py's _makes_torch_seed), so
# it consumes nothing before the seed (the interpreter's late-seed check)
MAKES_A_SEED = "<makes a seed>"

# Contexts a model is built in that spare its init some draws (extract/empty_init.py), by
# strength: each spares what the weaker ones do, and more.
# 1. Lightning's `_EmptyInit` (fabric/utilities/init.py): the `torch.nn.init` functions that
#    dispatch to `__torch_function__` (uniform_, normal_, kaiming_uniform_: what Linear, Conv,
#    Embedding, the RNNs and Bilinear use) return their tensor; the others still draw.
# 2. transformers' `no_init_weights()` (initialization.py): every `torch.nn.init` function,
#    also as torch's module files imported it, is a no-op; tensor methods still draw.
# 3. accelerate's `init_empty_weights()` (big_modeling.py init_on_device): each parameter is
#    moved to the meta device as it is registered, so whatever inits it draws nothing; a value
#    drawn before it becomes a parameter (`nn.Parameter(torch.randn(n))`) was drawn.
# 4. The meta device (`with torch.device("meta")`, torch/utils/_device.py DeviceContext): every
#    tensor made without a device is a meta tensor, and nothing drawn for one draws.
EMPTY_INIT_LIGHTNING, EMPTY_INIT_HF, EMPTY_INIT_PARAMETERS, EMPTY_INIT_META = 1, 2, 3, 4
# MODULE_INIT details of inits that still draw under the weaker contexts (none: spared by all):
# the level is the strongest context they draw under.
INIT_UNHOOKED = "<init: no torch function>"  # level 1: torch.nn.init functions _EmptyInit misses
INIT_TENSOR_FILL = "<init: tensor method>"  # level 2: `m.weight.data.normal_(0, 0.02)`
INIT_DRAWN_VALUE = "<init: drawn value>"  # level 3: `nn.Parameter(torch.randn(n))`
INIT_LEVELS = {INIT_UNHOOKED: EMPTY_INIT_LIGHTNING, INIT_TENSOR_FILL: EMPTY_INIT_HF, INIT_DRAWN_VALUE: EMPTY_INIT_PARAMETERS}
# torch 2.13's torch/nn/init.py: the functions without a `handle_torch_function` dispatch, and
# the layers whose init calls them (MultiheadAttention's xavier_uniform_)
UNHOOKED_INIT_FUNCTIONS = frozenset(
    "torch.nn.init." + n for n in "trunc_normal_ xavier_uniform_ xavier_normal_ kaiming_normal_ orthogonal_ sparse_".split()
)
UNHOOKED_INIT_MODULES = frozenset(
    "torch.nn." + n for n in "MultiheadAttention Transformer TransformerEncoderLayer TransformerDecoderLayer".split()
)
# Context managers by qualified name: (strength, the keyword that turns them on (None: always),
# the keyword that makes them meta, the position of a device argument that must be meta)
EMPTY_INIT_CONTEXTS: dict[str, tuple[int, str | None, str | None, int | None]] = {
    "accelerate.init_empty_weights": (EMPTY_INIT_PARAMETERS, None, "include_buffers", None),
    "accelerate.big_modeling.init_empty_weights": (EMPTY_INIT_PARAMETERS, None, "include_buffers", None),
    "accelerate.init_on_device": (EMPTY_INIT_PARAMETERS, None, "include_buffers", 0),
    "accelerate.big_modeling.init_on_device": (EMPTY_INIT_PARAMETERS, None, "include_buffers", 0),
    "transformers.modeling_utils.no_init_weights": (EMPTY_INIT_HF, "_enable", None, None),  # (4.x: `_enable`)
    "transformers.initialization.no_init_weights": (EMPTY_INIT_HF, None, None, None),
}


def names_a_seed(name: str) -> bool:
    """A variable (or a runtime condition's text) that says it holds a seed: `seed`, `run_seed`,
    `args.seed`."""
    return "seed" in name.lower()
ADAPTER_OF_TRAINER = ("<adapter>", "peft_config=")
# ... where the code does not show the config itself (`peft_config=get_peft_config(model_args)`,
# which is None unless the run asks for PEFT): drawn when a config is given
ADAPTER_OF_TRAINER_WHEN_GIVEN = ("<adapter>", "peft_config=", "when given")

KNOWN_HELPERS: dict[str, Helper] = {
    "lightning.seed_everything": _LIGHTNING,
    "lightning.pytorch.seed_everything": _LIGHTNING,
    "pytorch_lightning.seed_everything": _LIGHTNING,
    "lightning.fabric.utilities.seed.seed_everything": _LIGHTNING,
    "lightning_fabric.utilities.seed.seed_everything": _LIGHTNING,
    # Fabric.seed_everything, a static method calling the function above (workers=True unless given)
    "lightning.Fabric.seed_everything": _LIGHTNING,
    "lightning.fabric.Fabric.seed_everything": _LIGHTNING,
    "lightning_fabric.Fabric.seed_everything": _LIGHTNING,
    "transformers.set_seed": Helper(claims_when="deterministic", claim_position=1, enables_det_mode=True),
    "transformers.trainer_utils.set_seed": Helper(
        claims_when="deterministic", claim_position=1, enables_det_mode=True
    ),
    "transformers.enable_full_determinism": Helper(
        claims_when="always", enables_det_mode=True, sets_cublas=True, resets_benchmark=True
    ),
    "transformers.trainer_utils.enable_full_determinism": Helper(
        claims_when="always", enables_det_mode=True, sets_cublas=True, resets_benchmark=True
    ),
    "accelerate.utils.set_seed": Helper(claims_when="deterministic", claim_position=2, enables_det_mode=True),
    "accelerate.utils.random.set_seed": Helper(claims_when="deterministic", claim_position=2, enables_det_mode=True),
    # mmengine: cudnn.deterministic = True, benchmark = False, and deterministic mode (torch >= 1.10).
    "mmengine.runner.set_random_seed": Helper(
        claims_when="deterministic",
        claim_position=1,
        enables_det_mode=True,
        resets_benchmark=True,
        random_when_seed_none=True,
    ),
    "mmcv.runner.set_random_seed": Helper(
        claims_when="deterministic", claim_position=1, resets_benchmark=True, random_when_seed_none=True
    ),
    "detectron2.utils.env.seed_all_rng": Helper(random_when_seed_none=True),
    "timm.utils.random_seed": Helper(),
    "fastai.torch_core.set_seed": Helper(
        claims_when="reproducible", claim_position=1, resets_benchmark=True, seed_param="s"
    ),
    "torch_geometric.seed_everything": Helper(),
    # composer (MosaicML), read in composer/utils/reproducibility.py: seed_all seeds random, NumPy,
    # torch and every CUDA device; configure_deterministic_mode seeds nothing, turns deterministic
    # mode on, cudnn.benchmark off, and sets CUBLAS_WORKSPACE_CONFIG. (Its Trainer(seed=None)
    # draws a random seed, so the Trainer is not modelled as seeding.)
    "composer.utils.reproducibility.seed_all": Helper(),
    "composer.utils.reproducibility.configure_deterministic_mode": Helper(
        seeds=(), claims_when="always", enables_det_mode=True, sets_cublas=True, resets_benchmark=True
    ),
    "ultralytics.utils.torch_utils.init_seeds": Helper(
        claims_when="deterministic", claim_position=1, enables_det_mode=True, warn_only=True, sets_cublas=True
    ),
    "keras.utils.set_random_seed": Helper(),
    **{trainer: _HF_TRAINER for trainer in HF_TRAINERS},
}

# Command-line frameworks (extract/cli_apps.py), read in typer 0.29, click 8.5, tyro 1.0,
# jsonargparse 4.53 and fire 0.7. Calls that run the function they are given, or one of a list or
# dict of them (subcommands), there and then, with its parameters parsed from the command line
# (jsonargparse/_cli.py _run_component: `component(**cfg)`): (position, keyword) of that argument.
CLI_RUNNERS: dict[str, tuple[int, str]] = {
    "fire.Fire": (0, "component"),
    "fire.core.Fire": (0, "component"),
    "typer.run": (0, "function"),  # typer/main.py run: `app.command()(function); app()`
    "typer.main.run": (0, "function"),
    "tyro.cli": (0, "f"),
    "tyro.extras.subcommand_cli_from_dict": (0, "subcommands"),
    "jsonargparse.CLI": (0, "components"),
    "jsonargparse.auto_cli": (0, "components"),
    "absl.app.run": (0, "main"),
}
# Objects on which commands are registered, run when the object is called: typer's Typer
# (`app()`), click's Group (`cli()`, `cli.main()`), tyro's SubcommandApp (`app.cli()`)
CLI_APP_CLASSES = frozenset({
    "typer.Typer", "typer.main.Typer", "click.Group", "click.core.Group",
    "tyro.extras.SubcommandApp", "tyro.extras._subcommand_app.SubcommandApp",
})
# Decorators that make the function a click Group, the function being the group's callback
CLI_GROUP_DECORATORS = frozenset({"click.group", "click.decorators.group"})
