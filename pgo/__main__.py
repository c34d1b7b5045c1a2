import sys

from pgo.cli import main

sys.exit(main())
