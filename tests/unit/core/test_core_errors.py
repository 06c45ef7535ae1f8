"""core/errors: the user-error classes and their exit code; internal errors ask for a report.

(Named test_core_errors.py: pytest needs a basename unique beside sources/test_errors.py.)"""

import pytest

from mdloader_plugin.core.errors import (ConfigError, DataError, MDLoaderError,
                                         MemoryBudgetError, internal)


@pytest.mark.parametrize("cls", [MDLoaderError, DataError, ConfigError, MemoryBudgetError])
def test_user_errors_exit_2(cls):
    assert issubclass(cls, MDLoaderError) and cls("x").exit_code == 2


def test_internal_is_an_assertion_that_asks_for_a_report():
    err = internal("ranks hold 3 of 4 samples")
    assert isinstance(err, AssertionError) and not isinstance(err, MDLoaderError)
    assert str(err) == ("Internal error: ranks hold 3 of 4 samples (please report this as an "
                        "MDLoader bug)")
