"""Images: a second resource kind beside tensors — the host's render
targets, swapchain images and textures (imported), and images the guest
owns (``ctx.image``).

An :class:`Image` is one VkImage: format, extent, mip levels, array layers
and the usage it was created with. Kernels never see a whole image: an op
binds one 2-D subresource, an :class:`ImageBinding` — (mip level, array
layer), read *sampled* (``texelFetch``/``texture`` through a sampler2D,
which decodes sRGB and swizzles BGRA) or written as a *storage* image.

Hazards are tracked per VkImage and subresource (``hazard_key``), in the
same tracker as buffers, so two imports of one VkImage are one image
there. Imported images carry the host's declared layout and accesses
(``entry`` / ``exit``); guest work uses them in GENERAL, so the recorder
transitions an imported image once on entry and once on exit (see
vk/sync.py). Guest-owned images live in GENERAL from creation on.

``uid`` changes whenever the VkImage changes (``rebind`` after a
swapchain resize), so programs that captured the image re-record and
cached views and descriptors can never point at a dead image.
"""
from __future__ import annotations

import numpy as np

import vulkan as vk

from .errors import InvalidArgumentError, RecordingError, ShapeError, UnsupportedError
from .host.declarations import as_handle
from .host.images import (SAMPLED_USAGE, STORAGE_USAGE, TRANSFER_USAGE, HostImageState, as_host_image_state,
                          as_image_usage, usage_names)
from .vk import formats
from .vk.memory import next_uid
from .vk.structs import new
from .vk.sync import handle_value, image_hazard_key


def check_extent(extent, mip_levels: int = 1) -> tuple:
    """(width, height) from a pair of positive ints; the mip chain must fit."""
    try:
        w, h = extent
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"image extent must be (width, height), got {extent!r}") from None
    for v in (w, h):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise InvalidArgumentError(f"image extent must be two positive ints, got {extent!r}")
    w, h = int(w), int(h)
    if isinstance(mip_levels, bool) or not isinstance(mip_levels, (int, np.integer)) or mip_levels < 1:
        raise InvalidArgumentError(f"mip levels must be an int >= 1, got {mip_levels!r}")
    full = max(w, h).bit_length()
    if mip_levels > full:
        raise InvalidArgumentError(f"a {w}x{h} image has at most {full} mip levels, got {mip_levels}")
    return w, h


def image_states_for(image, layout, exit_layout, host_access, exit_access, what: str) -> tuple:
    """(entry, exit) HostImageStates for an imported image: given values
    override the import's declaration; ``exit_layout`` defaults to
    ``layout`` when that is given, ``exit_access`` to the exit preset's."""
    if not isinstance(image, Image) or not image.imported:
        raise InvalidArgumentError(f"{what} takes an image from ctx.import_image, got {image!r}")
    entry = image.entry if layout is None and host_access is None else \
        as_host_image_state(image.entry if layout is None else layout, host_access)
    if exit_layout is None and exit_access is None:
        exit_state = image.exit if layout is None and host_access is None else entry
    else:
        exit_state = as_host_image_state(image.exit if exit_layout is None else exit_layout, exit_access,
                                         "exit_layout")
    if exit_state.layout == 0:      # VK_IMAGE_LAYOUT_UNDEFINED
        raise InvalidArgumentError(f"{what}: an image cannot be handed back in layout 'undefined'; name the "
                                   "layout the host uses it in next")
    return entry, exit_state


class Image:
    """One VkImage as the guest sees it (see the module notes).

    Attributes: ``ctx``, ``handle``, ``format`` (a vk/formats.Format),
    ``width``, ``height``, ``mip_levels``, ``array_layers``, ``usage``
    (VkImageUsageFlags), ``mutable_format`` (created with
    MUTABLE_FORMAT: a UNORM storage view of an sRGB image is legal),
    ``imported`` with ``entry`` / ``exit`` (:class:`HostImageState`) for
    host images, ``uid``, ``last_epoch``.

    Thread-safety: like a tensor — shared by recording threads; ``rebind``
    while another thread records with the image is the caller's race.
    """

    def __init__(self, ctx, handle, fmt, extent, *, mip_levels=1, array_layers=1, usage=0,
                 mutable_format=False, alloc=None, entry: HostImageState = None, exit: HostImageState = None):
        self.ctx = ctx
        self.handle = handle
        self.handle_key = handle_value(handle)
        self.format = fmt
        self.width, self.height = int(extent[0]), int(extent[1])
        self.mip_levels = int(mip_levels)
        self.array_layers = int(array_layers)
        self.usage = int(usage)
        self.mutable_format = bool(mutable_format)
        self.alloc = alloc
        self.entry = entry
        self.exit = exit
        self.uid = next_uid()
        self.last_epoch = 0
        # A guest image still UNDEFINED: the first command buffer that uses
        # it moves it to GENERAL (see Transfers.init_image).
        self.pending_init = False
        # The BarrierStates of open recordings that moved this (imported)
        # image out of the host's layout: rebind waits until their exit.
        self.open_recordings: set = set()

    # -- facts -----------------------------------------------------------------
    @property
    def imported(self) -> bool:
        return self.entry is not None

    @property
    def extent(self) -> tuple:
        return (self.width, self.height)

    @property
    def sampled_usage(self) -> bool:
        """Created with SAMPLED usage: guest ops may read it through a sampler."""
        return bool(self.usage & SAMPLED_USAGE)

    @property
    def storage_usage(self) -> bool:
        """Created with STORAGE usage: guest ops may write it (and read it) as a storage image."""
        return bool(self.usage & STORAGE_USAGE)

    def mip_extent(self, mip: int) -> tuple:
        """(width, height) of mip level ``mip``."""
        return (max(1, self.width >> mip), max(1, self.height >> mip))

    def host_shape(self, mip: int = 0) -> tuple:
        """Shape of the numpy array that holds mip ``mip`` of one layer:
        (height, width) plus (channels,) for multi-channel, unpacked formats."""
        w, h = self.mip_extent(mip)
        return (h, w) + self.format.host_shape_tail

    def hazard_key(self, mip: int, layer: int) -> tuple:
        return image_hazard_key(self.handle_key, mip, layer)

    @property
    def memo_identity(self) -> int:
        """Plans made for this image hold while this is unchanged (ops/memo.py)."""
        return self.uid

    def __repr__(self):
        kind = "imported" if self.imported else "guest"
        return (f"<Image {kind} {self.format.name} {self.width}x{self.height} mips={self.mip_levels} "
                f"layers={self.array_layers} usage={usage_names(self.usage)}>")

    # -- subresources ------------------------------------------------------------
    def check_subresource(self, mip, layer, what: str) -> tuple:
        for name, value, count in (("mip", mip, self.mip_levels), ("layer", layer, self.array_layers)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < count:
                raise InvalidArgumentError(f"{what}: {name} {value!r} is outside this image's 0..{count - 1}")
        return int(mip), int(layer)

    def level(self, mip: int = 0, layer: int = 0) -> "ImageLevel":
        """One 2-D subresource (mip level, array layer) to pass to ops."""
        mip, layer = self.check_subresource(mip, layer, "Image.level")
        return ImageLevel(self, mip, layer)

    # -- host data (guest images) ---------------------------------------------------
    def numpy(self, mip: int = 0, layer: int = 0) -> np.ndarray:
        """The texels of (mip, layer) as a numpy array of :meth:`host_shape`
        in the format's own bytes and channel order (BGRA stays BGRA; packed
        formats give their 32-bit words). Guest images only: read an
        imported image with ``rec.copy(img, out=tensor)``."""
        self.ctx.device.check_open()
        if self.imported:
            raise UnsupportedError("numpy() of an imported image: its contents and layout are the host's; "
                                   "record rec.copy(image, out=tensor) and read the tensor")
        mip, layer = self.check_subresource(mip, layer, "Image.numpy")
        raw = self.ctx.device.transfers.read_image(self, mip, layer)
        return np.frombuffer(raw, dtype=self.format.dtype).reshape(self.host_shape(mip)).copy()

    def write(self, data, mip: int = 0, layer: int = 0) -> None:
        """Upload ``data`` (shape :meth:`host_shape`, any dtype that converts
        exactly to the format's channel dtype) into (mip, layer): on the
        queue, or, inside a recording on this thread (or without a queue),
        copied by that recording (the next one) like a tensor's upload."""
        self.ctx.device.check_open()
        if self.imported:
            raise UnsupportedError("write() into an imported image: the host owns its contents; record "
                                   "rec.copy(tensor, out=image) instead")
        mip, layer = self.check_subresource(mip, layer, "Image.write")
        arr = np.asarray(data)
        shape = self.host_shape(mip)
        if arr.shape != shape:
            raise ShapeError(f"Image.write: {self.format.name} mip {mip} takes an array of shape {shape}, "
                             f"got {arr.shape}")
        want = np.dtype(self.format.dtype)
        if arr.dtype != want:
            if not np.can_cast(arr.dtype, want, "same_kind") or not np.array_equal(arr.astype(want), arr):
                raise InvalidArgumentError(f"Image.write: {self.format.name} holds {want} channels; "
                                           f"{arr.dtype} data does not convert exactly")
            arr = arr.astype(want)
        self.ctx.device.transfers.write_image(self, mip, layer, np.ascontiguousarray(arr).tobytes())

    # -- host images -------------------------------------------------------------------
    def rebind(self, handle, extent=None) -> None:
        """The host re-created its image (a swapchain resize): point this
        import at ``handle`` (same format, mips, layers and usage; ``extent``
        if it changed). The uid changes, so programs that captured the image
        re-record at their next execute; views of the old VkImage retire with
        the epoch of its last use."""
        if not self.imported:
            raise UnsupportedError("rebind() is for imported images; make a new guest image instead")
        self.ctx.device.check_open()
        handle = as_handle(handle, "VkImage", "Image.rebind image")
        if self.open_recordings:
            # Its exit transition (back to the host's layout) is still to be
            # recorded, for the VkImage the recording used.
            raise RecordingError("Image.rebind() while an open recording uses the image: that recording "
                                 "still hands the old VkImage back to the host at its end; rebind after "
                                 "its `with ctx.record(cmd)` block")
        old_uid, last = self.uid, self.last_epoch
        self.handle = handle
        self.handle_key = handle_value(handle)
        if extent is not None:
            self.width, self.height = check_extent(extent, self.mip_levels)
        self.uid = next_uid()
        self.last_epoch = 0
        self.ctx.count_swap()       # programs that captured the image look again
        self.ctx.device.retire_image(old_uid, last)

    def __del__(self):
        ctx = self.ctx
        if ctx is None or ctx.closed:
            return
        if self.alloc is not None:
            ctx.device.epochs.release(self.alloc, self.uid, self.last_epoch)
        else:
            ctx.device.retire_image(self.uid, self.last_epoch)


class ImageLevel:
    """One 2-D subresource of an image: ``image``, ``mip``, ``layer``."""
    __slots__ = ("image", "mip", "layer", "__weakref__")

    def __init__(self, image: Image, mip: int, layer: int):
        self.image, self.mip, self.layer = image, mip, layer

    @property
    def ctx(self):
        return self.image.ctx

    @property
    def memo_identity(self) -> int:
        return self.image.uid

    @property
    def extent(self) -> tuple:
        return self.image.mip_extent(self.mip)

    @property
    def width(self) -> int:
        return self.extent[0]

    @property
    def height(self) -> int:
        return self.extent[1]

    def numpy(self) -> np.ndarray:
        """This level's texels (see Image.numpy)."""
        return self.image.numpy(self.mip, self.layer)

    def write(self, data) -> None:
        """Upload into this level (see Image.write)."""
        self.image.write(data, self.mip, self.layer)

    def __repr__(self):
        return f"<ImageLevel mip={self.mip} layer={self.layer} of {self.image!r}>"


SAMPLED, STORAGE, TEXTURE = "sampled", "storage", "texture"


class SamplerBinding:
    """A GLSL ``sampler`` binding of a user kernel: ``filter`` "nearest" or
    "linear", clamp to edge. Samplers live as long as the device."""
    __slots__ = ("sampler", "uid", "kind", "sampler_handle", "hazard_keys", "alloc", "host_access",
                 "last_epoch")

    def __init__(self, sampler: str):
        self.sampler = sampler
        self.uid = ("sampler", sampler)
        self.kind = "sampler"
        self.sampler_handle = None
        self.hazard_keys = ()
        self.alloc = self.host_access = None
        self.last_epoch = 0


class ImageBinding:
    """What one kernel binding sees of an image: one (mip, layer), read
    sampled or written/read as a storage image, through a view of
    ``vk_format`` (the image's own, or the UNORM twin of an sRGB format),
    with ``sampler`` ("nearest"/"linear") for sampled bindings.

    ``view`` / ``sampler_handle`` are filled in when the recorder resolves
    the dispatch (device/image_views.py). ``uid`` names the descriptor it
    needs; ``owner_uid`` the image whose retirement drops it."""
    __slots__ = ("image", "mip", "layer", "kind", "vk_format", "sampler", "uid", "owner_uid",
                 "hazard_keys", "view", "sampler_handle", "alloc", "host_access", "last_epoch", "view_usage")

    def __init__(self, image: Image, mip: int, layer: int, kind: str, vk_format: int = None,
                 sampler: str = "nearest", view_usage: int = 0):
        self.image, self.mip, self.layer, self.kind = image, mip, layer, kind
        self.vk_format = image.format.vk_format if vk_format is None else vk_format
        self.sampler = sampler
        self.view_usage = view_usage        # 0: the image's usage
        self.uid = (image.uid, mip, layer, kind, self.vk_format, sampler, view_usage)
        self.owner_uid = image.uid
        self.hazard_keys = (image.hazard_key(mip, layer),)
        self.view = self.sampler_handle = None
        self.alloc = None           # the rest of tensor.Binding, which the dispatch plan reads
        self.host_access = None
        self.last_epoch = 0

    @property
    def still_current(self) -> bool:
        """False once the image was rebound (a new VkImage)."""
        return self.owner_uid == self.image.uid


# -- making images -------------------------------------------------------------------

_MUTABLE_FORMAT = vk.VK_IMAGE_CREATE_MUTABLE_FORMAT_BIT
# VK_IMAGE_CREATE_EXTENDED_USAGE_BIT (Vulkan 1.1): the `vulkan` package
# lacks the core name and gives None for the KHR one.
_EXTENDED_USAGE = 0x100


def as_format(value, what: str = "format"):
    fmt = formats.find(value)
    if fmt is None:
        raise UnsupportedError(f"{what} {value!r} is not a format guestcompute knows; use one of "
                               f"{formats.format_names()} (or their VkFormat values)")
    return fmt


def check_format_usage(ctx, fmt, usage: int, what: str) -> None:
    """The format must have, on this device, the features the usage needs."""
    have = ctx.device.format_features[fmt.name]
    for bit, feature in ((SAMPLED_USAGE, formats.SAMPLED), (STORAGE_USAGE, formats.STORAGE)):
        if usage & bit and not have & feature:
            raise UnsupportedError(f"{what}: {fmt.name} has no {formats.FEATURE_NAMES[feature]} feature on this "
                                   f"device, so an image of it cannot have {usage_names(bit)} usage")


_WRITE_WITHOUT_FORMAT = "shaderStorageImageWriteWithoutFormat"


def storage_format(ctx, fmt, mutable_format: bool, what: str):
    """The format of a storage view of an image of ``fmt``: its own, or for
    an sRGB image (never a storage format) its UNORM twin, which needs the
    image made MUTABLE_FORMAT and (for the sampled sRGB view to drop
    STORAGE) Vulkan 1.1."""
    if fmt.kind != "srgb":
        return fmt
    if not mutable_format:
        raise UnsupportedError(f"{what}: sRGB images cannot be storage images; create it with "
                               "VK_IMAGE_CREATE_MUTABLE_FORMAT_BIT (and say mutable_format=True) so the "
                               "guest writes it through a UNORM view, or write a UNORM image")
    if ctx.caps.api_version < (1, 1):
        raise UnsupportedError(f"{what}: a storage {fmt.name} image is written through a {fmt.unorm} view and "
                               "sampled through an sRGB view without STORAGE usage, which needs Vulkan 1.1 "
                               "(the host declared an older api_version)")
    return formats.FORMATS[fmt.unorm]


def storage_write_problem(ctx, view_fmt, what: str):
    """Why guest ops cannot write through a storage view of ``view_fmt``
    here (a message), or None."""
    if not ctx.device.format_features[view_fmt.name] & formats.STORAGE:
        return f"{what}: {view_fmt.name} has no STORAGE_IMAGE feature on this device"
    if view_fmt.qualifier or ctx.caps.feature(_WRITE_WITHOUT_FORMAT):
        return None
    need = f"{what}: GLSL has no storage format for {view_fmt.name}, so writing it needs {_WRITE_WITHOUT_FORMAT}"
    if _WRITE_WITHOUT_FORMAT in ctx.device.limits.supported_core_features:
        return (f"{need}; the device supports it but it was not declared at adopt: enable it at vkCreateDevice "
                f"(VkPhysicalDeviceFeatures) and pass it to gc.adopt (features={{'{_WRITE_WITHOUT_FORMAT}': "
                "True}, or the VkDeviceCreateInfo)")
    return (f"{need}, which this device does not support: write a guest image (ctx.image) and have the host "
            "copy or blit it")


def check_image_limits(ctx, fmt, extent, mips: int, layers: int, usage: int, flags: int) -> None:
    """UnsupportedError unless the device can make this image: its extent,
    layers, mips and bytes within the device's limits (maxImageDimension2D,
    maxImageArrayLayers) and those of the format with this usage
    (vkGetPhysicalDeviceImageFormatProperties). Asked before vkCreateImage,
    which drivers need not survive past them."""
    w, h = extent
    dev = ctx.device
    limits = dev.image_limits(fmt.vk_format, usage, flags)
    if limits is None:
        raise UnsupportedError(f"ctx.image: this device makes no {fmt.name} image with usage "
                               f"{usage_names(usage)}; use another format or usage")
    max_w = min(dev.limits.max_image_dimension_2d, limits.max_width)
    max_h = min(dev.limits.max_image_dimension_2d, limits.max_height)
    if w > max_w or h > max_h:
        raise UnsupportedError(f"ctx.image: a {w}x{h} {fmt.name} image is larger than this device allows "
                               f"({max_w}x{max_h} at most); use a smaller image, or tiles of one")
    max_layers = min(dev.limits.max_image_array_layers, limits.max_array_layers)
    if layers > max_layers:
        raise UnsupportedError(f"ctx.image: {layers} array layers, but this device allows {max_layers} in one "
                               f"{fmt.name} image; use fewer layers, or several images")
    if mips > limits.max_mip_levels:
        raise UnsupportedError(f"ctx.image: {mips} mip levels, but this device allows {limits.max_mip_levels} "
                               f"for {fmt.name}; use fewer mips")
    nbytes = sum(max(1, w >> m) * max(1, h >> m) for m in range(mips)) * layers * fmt.texel_bytes
    if nbytes > limits.max_resource_size:
        raise UnsupportedError(f"ctx.image: the image needs {nbytes} bytes, more than the "
                               f"{limits.max_resource_size} this device allows one {fmt.name} image "
                               "(maxResourceSize); use a smaller image or fewer layers")


def import_image(ctx, vk_image, fmt, extent, *, layout, host_access=None, exit_layout=None, exit_access=None,
                 mip_levels=1, array_layers=1, aspect="color", usage=None, mutable_format=False,
                 samples=1, image_type="2d") -> Image:
    """See Context.import_image."""
    ctx.device.check_open()
    handle = as_handle(vk_image, "VkImage", "import_image image")
    fmt = as_format(fmt)
    if image_type != "2d":
        raise UnsupportedError(f"import_image: {image_type!r} images are not supported; guest ops work on "
                               "2-D images (array layers are fine)")
    if samples != 1:
        raise UnsupportedError(f"import_image: multisampled images ({samples} samples) cannot be read by "
                               "compute here; resolve them first (vkCmdResolveImage or a resolve attachment)")
    want_aspect = "depth" if fmt.kind == "depth" else "color"
    if aspect != want_aspect:
        raise InvalidArgumentError(f"import_image: a {fmt.name} image has the {want_aspect!r} aspect, got "
                                   f"{aspect!r}")
    w, h = check_extent(extent, mip_levels)
    if isinstance(array_layers, bool) or not isinstance(array_layers, (int, np.integer)) or array_layers < 1:
        raise InvalidArgumentError(f"array_layers must be an int >= 1, got {array_layers!r}")
    if usage is None:
        # A guess would hide a missing flag until the validation layer reports
        # every frame (a swapchain made with COLOR_ATTACHMENT only).
        raise InvalidArgumentError(
            "import_image: say how the host created the image: usage= its VkImageCreateInfo.usage (or the "
            "swapchain's imageUsage), e.g. usage=\"color_attachment|sampled|storage\"; guest ops read an image "
            "through SAMPLED and write it through STORAGE")
    usage = as_image_usage(usage)
    if not usage & (SAMPLED_USAGE | STORAGE_USAGE):
        raise InvalidArgumentError(f"import_image: usage {usage_names(usage)} has neither SAMPLED nor STORAGE; "
                                   "guest ops read images sampled and write them as storage images")
    if usage & STORAGE_USAGE:
        # Writes go through a storage view: of the image's own format, or
        # of an sRGB image's UNORM twin when it was made MUTABLE_FORMAT.
        view_fmt = storage_format(ctx, fmt, mutable_format, "import_image")
        problem = storage_write_problem(ctx, view_fmt, "import_image")
        if problem:
            raise UnsupportedError(f"{problem}; or, if the guest only reads this image, declare usage without "
                                   "'storage'")
        check_format_usage(ctx, fmt, usage & ~STORAGE_USAGE, "import_image")
    else:
        check_format_usage(ctx, fmt, usage, "import_image")
    img = Image(ctx, handle, fmt, (w, h), mip_levels=mip_levels, array_layers=array_layers, usage=usage,
                mutable_format=mutable_format)
    img.entry = as_host_image_state(layout, host_access)
    img.exit = img.entry
    img.entry, img.exit = image_states_for(img, None, exit_layout, None, exit_access, "import_image")
    return img


def create_image(ctx, extent, fmt, *, mips=1, layers=1, usage=None) -> Image:
    """See Context.image."""
    ctx.device.check_open()
    fmt = as_format(fmt)
    w, h = check_extent(extent, mips)
    if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)) or layers < 1:
        raise InvalidArgumentError(f"layers must be an int >= 1, got {layers!r}")
    have = ctx.device.format_features[fmt.name]
    # An sRGB image is written through a UNORM view (sRGB formats are never
    # storage formats): MUTABLE_FORMAT, and EXTENDED_USAGE (Vulkan 1.1) so
    # STORAGE usage is checked against the view's format, not the image's.
    srgb_storage = bool(fmt.unorm) and ctx.caps.api_version >= (1, 1) and \
        bool(ctx.device.format_features[fmt.unorm] & formats.STORAGE)
    if usage is None:
        usage = TRANSFER_USAGE
        usage |= SAMPLED_USAGE if have & formats.SAMPLED else 0
        usage |= STORAGE_USAGE if have & formats.STORAGE or srgb_storage else 0
    else:
        usage = as_image_usage(usage) | TRANSFER_USAGE
    check_format_usage(ctx, fmt, usage & ~(STORAGE_USAGE if srgb_storage else 0), "ctx.image")
    flags = (_MUTABLE_FORMAT | _EXTENDED_USAGE) if srgb_storage else 0
    check_image_limits(ctx, fmt, (w, h), int(mips), int(layers), usage, flags)
    info = new("VkImageCreateInfo", flags=flags, imageType=vk.VK_IMAGE_TYPE_2D, format=fmt.vk_format,
               extent=dict(width=w, height=h, depth=1), mipLevels=int(mips), arrayLayers=int(layers),
               samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL, usage=usage,
               sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED)
    ctx.device.epochs.collect()
    alloc = ctx.device.memory.create_image(info)
    img = Image(ctx, alloc.image, fmt, (w, h), mip_levels=mips, array_layers=layers, usage=usage,
                mutable_format=bool(flags), alloc=alloc)
    ctx.device.transfers.init_image(img)
    return img


def image_from(ctx, data, fmt, *, mips=1) -> Image:
    """See Context.image_from."""
    fmt = as_format(fmt)
    arr = np.asarray(data)
    tail = fmt.host_shape_tail
    if arr.ndim != 2 + len(tail) or arr.shape[2:] != tail:
        raise ShapeError(f"image_from: a {fmt.name} image takes an array of shape (height, width)"
                         f"{' + ' + str(tail) if tail else ''}, got {arr.shape}")
    img = create_image(ctx, (arr.shape[1], arr.shape[0]), fmt, mips=mips)
    img.write(arr)
    return img
