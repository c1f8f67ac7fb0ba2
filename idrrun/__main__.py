"""`python -m idrrun`: the idrrun command."""

import sys

from .cli import main

sys.exit(main())
