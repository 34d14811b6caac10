"""torchrepro-lint: find reproducibility hazards in PyTorch code before they cost a week."""

__version__ = "0.1.0"
HOMEPAGE = "https://github.com/torchrepro-lint/torchrepro-lint"


def rule_url(code: str) -> str:
    return f"{HOMEPAGE}/blob/main/rules/{code}.md"
