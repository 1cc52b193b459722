"""servedoctor: bring LLM inference servers up on new GPUs and say why they crash.

The public API is the names in ``__all__``; importing this package never loads the CLI.
"""

from __future__ import annotations

from servedoctor.model import Change, Diagnosis, Evidence, Hypothesis

__all__ = ["Change", "Diagnosis", "Evidence", "Hypothesis", "__version__"]
__version__ = "0.1.0"
