"""The libdevice function set under this vendor's name: the same functions as
`tilejit.language.extra.libdevice` (they compile for every backend)."""
from ..libdevice import *  # noqa: F401,F403
from ..libdevice import __all__  # noqa: F401
