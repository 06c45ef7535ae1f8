"""Build of the optional compiled batch kernels (everything else is in pyproject.toml).

``optional=True``: a machine without a C compiler still installs MDLoader; the loader then
builds batches with numpy and says so in one warning line (mdloader_plugin/records/kernels.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mdloader_plugin.records._kernels",
                             ["mdloader_plugin/records/_kernels.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c99"])])
