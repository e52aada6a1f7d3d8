"""``python -m coordinator`` is ``kgb`` (for hosts where the package is not pip-installed)."""

from coordinator.entry import main

main()
