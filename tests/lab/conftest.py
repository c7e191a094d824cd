"""The lab runs real torch on the CPU; without torch these tests have nothing to run (each
module is marked ``needs_torch``; ``user_code`` is imported inside the tests that use it, so
collecting them does not import torch)."""
