import sys

from torchrepro_lint.cli import main

sys.exit(main())
