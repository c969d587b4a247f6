"""The package's version (L0): one line, set by ``.ci/changelog.py cut`` together with pyproject.toml's."""

__all__ = ("__version__",)

__version__ = "0.1.0"
