"""Build of the optional compiled parts (everything else is in pyproject.toml): the batch kernels
and the read deadline's native thread.

``optional=True``: a machine without a C compiler still installs MDLoader; the loader then
builds batches with numpy and says so in one warning line (mdloader_plugin/records/kernels.py),
and a read past ``MDLOADER_READ_TIMEOUT`` ends its own process through faulthandler instead of
aborting the job with one line (mdloader_plugin/core/deadline.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mdloader_plugin.records._kernels",
                             ["mdloader_plugin/records/_kernels.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c99"]),
                   Extension("mdloader_plugin.core._deadline", ["mdloader_plugin/core/_deadline.c"],
                             optional=True, extra_compile_args=["-O2"])])
