"""MDLoader's Hydra search-path plugin (:mod:`.searchpath`): the ``loader`` config group found
from any config, in any folder (module doc there)."""
