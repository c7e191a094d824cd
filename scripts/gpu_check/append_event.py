"""``--on-finding`` hook for scripts/gpu_check.py: append the event (JSON on stdin) to a file.

python append_event.py FILE
"""

import sys

data = sys.stdin.read().strip()
with open(sys.argv[1], "a", encoding="utf-8") as f:
    f.write(data.replace("\n", " ") + "\n")
