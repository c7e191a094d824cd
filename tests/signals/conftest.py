from tests.signals.trees import start_tree  # noqa: F401
