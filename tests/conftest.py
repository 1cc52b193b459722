"""Hypothesis profiles: the suite is reproducible; exploration is a separate, explicit run.

``make test`` (and CI) uses the ``repeatable`` profile: the same examples on every run, so a
red build always means a change in the code, never a lucky draw. ``make fuzz`` selects
``explore`` through ``HYPOTHESIS_PROFILE``: fresh random examples, many more of them, to find
new bugs; each one found becomes an explicit regression test.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("repeatable", max_examples=200, derandomize=True, print_blob=True)
settings.register_profile("explore", max_examples=5000, derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
