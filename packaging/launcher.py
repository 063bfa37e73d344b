"""Entry script of the frozen app: the same ``hermes-tray`` command line as the pip install."""

import sys

from hermes_tray.cli import main

if __name__ == "__main__":
    sys.exit(main())
