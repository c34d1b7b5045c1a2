import sys

from vm_images.cli import main

sys.exit(main())
