from torchrepro_lint.cli import run

run()
