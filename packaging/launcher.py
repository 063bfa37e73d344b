"""Entry script of the frozen app: the same ``hermes-tray`` command line as the pip install."""

from hermes_tray.cli import entry

if __name__ == "__main__":
    entry()
