"""Framework integrations: one sub-package a framework, each with ``driver.main(args)``.

``mdloader train NAME`` imports ``mdloader_plugin.integrations.NAME.driver`` and calls its
``main``; nothing outside this package imports a training framework.
"""

FRAMEWORKS = ("hydragnn", "fairchem")
