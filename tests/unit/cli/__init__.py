"""A package, so that the modules here (one a ``mdloader`` command: ``test_<command>.py``) may
share a basename with a module's tests elsewhere (``tests/unit/sampling/test_plan.py``): pytest
imports them as ``cli.test_<command>``."""
