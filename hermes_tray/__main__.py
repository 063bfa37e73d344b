import sys

from hermes_tray.cli import main

sys.exit(main())
