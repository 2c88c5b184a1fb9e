import sys

from put.cli import main

sys.exit(main())
