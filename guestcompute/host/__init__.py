"""The host contract, by concern: what a host should enable
(``requirements.py``), what it declares and how that is checked
(``declarations.py``: handles, :class:`HostAccess`, usage flags), what it
enabled as the guest sees it (``caps.py``: :class:`HostCaps`) and the image
side of the contract (``images.py``: layouts, usage).

The public names are re-exported here, so ``from guestcompute.host import
HostAccess`` keeps working; modules of the package import from the
submodule that owns a name. (``requirements`` here is the function; its
module is ``guestcompute.host.requirements`` in ``sys.modules``.)
"""
from .caps import CORE_SINCE, FEATURE_FIELDS, FEATURE_STRUCTS, HostCaps, declared_caps, features_from_chain
from .declarations import (ACCESS_PRESETS, BUFFER_USAGE_NAMES, COMPUTE, FRAGMENT_READ, HOST, INDEX_BUFFER,
                           INDIRECT_BUFFER, TRANSFER, VERTEX_BUFFER, VERTEX_SHADER_READ, HostAccess,
                           as_buffer_usage, as_handle, as_host_access, check_queue_family, extension_names,
                           parse_flags, version_tuple)
from .images import (IMAGE_USAGE_NAMES, LAYOUT_PRESETS, SAMPLED_USAGE, STORAGE_USAGE, TRANSFER_USAGE,
                     HostImageState, as_host_image_state, as_image_usage, usage_names)
from .requirements import (CORE_FEATURES, GET_PROPERTIES2, OPTIONAL_EXTENSIONS, USED_SINCE, Requirements,
                           query_features, requirements, supported_extensions)

__all__ = [
    "ACCESS_PRESETS", "BUFFER_USAGE_NAMES", "COMPUTE", "CORE_FEATURES", "CORE_SINCE", "FEATURE_FIELDS",
    "FEATURE_STRUCTS", "FRAGMENT_READ", "GET_PROPERTIES2", "HOST", "IMAGE_USAGE_NAMES", "INDEX_BUFFER",
    "INDIRECT_BUFFER", "LAYOUT_PRESETS", "OPTIONAL_EXTENSIONS", "SAMPLED_USAGE", "STORAGE_USAGE", "TRANSFER",
    "TRANSFER_USAGE", "USED_SINCE", "VERTEX_BUFFER", "VERTEX_SHADER_READ", "HostAccess", "HostCaps",
    "HostImageState", "Requirements", "as_buffer_usage", "as_handle", "as_host_access", "as_host_image_state",
    "as_image_usage", "check_queue_family", "declared_caps", "extension_names", "features_from_chain",
    "parse_flags", "query_features", "requirements", "supported_extensions", "usage_names", "version_tuple",
]
