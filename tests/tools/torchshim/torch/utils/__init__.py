"""torch.utils of the GuideLLM shim (see torch/__init__.py)."""

from . import data  # noqa: F401
