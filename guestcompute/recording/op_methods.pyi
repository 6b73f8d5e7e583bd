"""Every op method of the Recorder, for grep, IDEs and type checkers.

Generated from the op registry by ``python -m guestcompute.recording.op_methods``;
tests/recording/test_op_surface.py keeps it equal to what op_methods.py builds at import.
"""
from typing import Any


class OpMethods:

    def abs(self, x, *, out=...) -> Any:
        """
        Elementwise |x|. Allocates ``out`` when omitted. complex64: the modulus as float32 (a scaled hypot, within 1 ulp).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def add(self, a, b, *, out=...) -> Any:
        """
        ``out = a + b`` elementwise with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted. complex64: either operand (or a Python complex ``b``) makes the result complex64 (numpy's promotion, uint8 tensors included; int32/uint32 tensors with complex, and uint8 ones with a complex scalar, raise DTypeError), see ops/complex_math.py.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def angle(self, x, *, out=...) -> Any:
        """
        numpy's ``np.angle`` in radians: ``atan2(imag, real)`` of a complex64
        tensor as float32, within 6 ulp, with C99's signed zeros and infinities.
        On a real tensor ``atan2(+0, x)``: pi where the sign bit is set (-0.0
        too), 0 elsewhere, NaN for NaN; float16 gives float16, int32/uint32
        float32 (numpy: float64). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def argmax(self, x, axis=..., *, keepdims=..., out=...) -> Any:
        """
        uint32 index of the first maximum along ``axis`` (int, or None = flat index). ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def argmin(self, x, axis=..., *, keepdims=..., out=...) -> Any:
        """
        uint32 index of the first minimum along ``axis`` (int, or None = flat index). ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def argsort(self, keys, out=..., *, axis=..., key_bits=..., count=...) -> Any:
        """
        Indices that stably sort ``keys`` (uint32, int32, float32, float16; uint64 1-D) along
        ``axis``: numpy's ``np.argsort(keys, axis, kind="stable")`` as uint32
        (``out`` may be uint32 or int32). Over a tensor of two or more
        dimensions each line along ``axis`` is sorted on its own (one sort of all
        keys, then a stable sort of the result by line). ``count`` (1-D keys
        only): as for ``sort``, the indices of the first ``count[0]`` keys.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def bloom(self, img, out=..., *, threshold=..., intensity=..., levels=...) -> Any:
        """
        Add bloom to HDR image ``img`` (see the module notes) into ``out``
        (an image or float32 pixel tensor; default a new image like ``img``;
        may be ``img``). ``threshold``: the Rec. 709 luminance above which light
        blooms (the colour is scaled by ``(L - threshold) / L``, keeping its
        hue); ``intensity``: how much of the glow is added; ``levels``: how many
        halvings the glow spreads over (at most what the half-size image has).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def cast(self, x, dtype, *, out=...) -> Any:
        """
        Convert to ``dtype`` like numpy's ``astype`` (see ops/cast.py): any
        compute dtype into any other or into complex64 (imaginary parts +0);
        complex64 into complex64 only (take ``x.real`` for the real parts).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def ceil(self, x, *, out=...) -> Any:
        """
        Elementwise the smallest whole number >= x (exact; integers as they are). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def clamp(self, x, lo=..., hi=..., *, out=...) -> Any:
        """
        ``min(max(x, lo), hi)`` with Python-number bounds, like ``np.clip``
        (either bound may be None; when ``lo > hi`` every element becomes ``hi``;
        NaN in ``x`` or a NaN bound gives NaN).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def colour_lut(self, img, lut, out=..., *, strength=...) -> Any:
        """
        Grade ``img`` (an image or a float32 pixel tensor) through the 3-D
        colour table ``lut``: a float32 tensor of shape (N, N, N, 3) or
        (N, N, N, 4), N >= 2, indexed ``lut[b, g, r]`` (red varies fastest, the
        order of .cube files; a fourth channel is ignored). Any view works: the
        table is read through its strides.

        Per pixel, r, g and b are clamped to [0, 1], scaled by N - 1, and the
        table is interpolated trilinearly between the 8 entries around that
        point; ``out.rgb = rgb + strength * (graded - rgb)`` with ``rgb`` the
        unclamped input, ``strength`` in [0, 1] (0 gives the input, 1 the
        table's colour). Alpha passes through; channels an operand lacks read
        as 0. ``out`` defaults to a new image (tensor) like ``img``, may be
        ``img`` itself, and must not overlap ``lut``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def colour_matrix(self, img, matrix, out=..., *, offset=...) -> Any:
        """
        ``out = matrix @ rgba + offset`` per pixel of ``img`` (an image or a
        float32 pixel tensor). ``matrix``: 4x4, or 3x3 for RGB (alpha passes
        through); ``offset``: 4 (or 3) numbers. ``out`` defaults to a new image
        (tensor) like ``img`` and may be ``img`` itself.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def compact(self, x, mask, *, count=..., out=..., out_count=...) -> Any:
        """
        The elements of ``x`` where ``mask`` is nonzero, in order (numpy's
        ``x[mask]`` for ``x`` and ``mask`` of one shape, flattened in C order),
        and their number: returns ``(values, n)``. ``values`` has room for all
        of ``x`` (shape ``(x.size,)``, dtype of ``x``) and only its first ``n``
        elements are written; ``n`` is a 1-element uint32 tensor written on the
        GPU, ready to be the ``count=`` of a later op. ``x``: any 4-byte dtype,
        uint8 or float16; ``mask``: uint8, uint32, int32 or float32 (float NaN
        is true, -0.0 false). ``count`` (a 1-element uint32/int32 GPU tensor):
        only the first ``min(count, x.size)`` elements take part. ``out`` and
        ``out_count`` must not overlap the inputs.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def concat(self, tensors, axis=..., *, out=...) -> Any:
        """
        Join tensors along ``axis`` (all other dims equal, one dtype).
        Views are read in place. ``out`` must not overlap an input.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def conj(self, x, *, out=...) -> Any:
        """
        Complex conjugate, numpy's ``np.conj``: the imaginary parts negated
        (NaN's sign bit too); on a real dtype a copy. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def contiguous(self, x, *, out=...) -> Any:
        """
        A fresh contiguous copy of the view ``x`` (or into ``out``).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def conv2d(self, img, kernel, out=...) -> Any:
        """
        2-D filter of every channel of ``img`` with a small ``kernel`` (a
        numpy array or a float32 tensor, at most 7x7), borders clamped:
        ``out[y, x] = sum k[i, j] * img[y + i - kh//2, x + j - kw//2]`` — a
        correlation, as in most deep-learning libraries (flip the kernel for a
        mathematical convolution). ``out`` must not overlap ``img``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def copy(self, src, *, out=...) -> Any:
        """
        Copy ``src`` into ``out``. Tensors: broadcast and any strides.
        Images (an Image or ``img.level(mip, layer)``) to images or tensors and
        back: see ops/image_copy.py for values and channels (uint8 tensors hold
        0..255, float32 tensors 0..1 for UNORM). Allocates ``out`` when omitted
        (for an image source: a float32 tensor).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def cos(self, x, *, out=...) -> Any:
        """
        Elementwise cosine (within 2 ulp for every float32). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def cumsum(self, x, axis=..., exclusive=..., out=..., *, count=...) -> Any:
        """
        Prefix sum of ``x`` along ``axis`` (float32, int32, uint32; any view).

        Inclusive by default (numpy's ``np.cumsum``); ``exclusive=True`` puts
        the sum of the *preceding* elements at each position (0 first).
        Integers wrap on overflow and keep their dtype, as
        ``np.cumsum(x, dtype=x.dtype)``. ``out`` may be ``x`` itself (in place)
        but must not partially overlap it. Float sums are tree-shaped, so they
        differ from numpy's sequential ones by rounding only.

        ``count`` (1-D ``x`` only): a 1-element uint32/int32 tensor, written
        earlier on the GPU; only the first ``min(count, x.size)`` elements are
        scanned and written, the rest of ``out`` is left as it was.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def dispatch_count(self, count, fn, *args, **kwargs) -> Any:
        """
        Record op ``fn`` over (about) the first ``count[0]`` items only, with a
        grid sized on the GPU from ``count`` (a 1-element uint32/int32 tensor an
        earlier op wrote): ``groups_from_count`` + ``dispatch_indirect`` with the
        op kernel's items per workgroup. For single-dispatch ops whose kernels
        index items linearly (elementwise ops).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def dispatch_indirect(self, groups, fn, *args, **kwargs) -> Any:
        """
        Record op ``fn`` (a name such as ``"add"`` or an op function) with
        ``*args, **kwargs``, taking every one of its dispatches' workgroup
        counts from ``groups`` (uint32 ``(x, y, z)``, e.g. from
        ``rec.groups_from_count``). Returns what the op returns.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def div(self, a, b, *, out=...) -> Any:
        """
        true division ``a / b`` (the device's division accuracy, Vulkan's 2.5 ulp at most, for every finite operand; int32/uint32 operands give float32, where numpy gives float64: ``float(a) / float(b)``, exact inputs up to 2**24), with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted. complex64: either operand (or a Python complex ``b``) makes the result complex64 (numpy's promotion, uint8 tensors included; int32/uint32 tensors with complex, and uint8 ones with a complex scalar, raise DTypeError), see ops/complex_math.py.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def equal(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a == b`` elementwise with broadcasting: 1 where it holds, else 0 (false where either is NaN); ``b`` may be a Python number. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def exp(self, x, *, out=...) -> Any:
        """
        Elementwise e**x (within 2 ulp). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def fft(self, x, n=..., axis=..., norm=..., out=...) -> Any:
        """
        numpy.fft.fft: the forward DFT of float32, float16 or complex64 ``x`` along ``axis``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def fft2(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.fft2: fftn over the last two axes (an image's spatial axes:
        ``x`` may be an image, ops/fft_images.py).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def fft_convolve(self, x, spectrum, axes=..., out=...) -> Any:
        """
        ``x`` (float32 or float16) circularly convolved over ``axes`` with
        the kernel whose ``rec.rfft2`` (at ``x``'s size over the same axes) is
        ``spectrum`` (complex64, broadcast over ``x``'s other axes): numpy's
        ``irfft2(rfft2(x, axes=axes) * spectrum, s, axes=axes)``, computed in
        float32. The result has ``x``'s shape: a new float32 tensor, or
        ``out=`` of float32 or float16 (``x`` itself works). ``x`` may be an
        image and ``out`` an image (ops/fft_images.py): an image's channels are
        batches, its spatial axes the default (``axes=(-2, -1)`` means them,
        given or not); an image ``x`` with a float16
        ``out``, or a float16 ``x`` with an image ``out``, work as well.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def fftn(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.fftn over ``axes`` (default all; the last len(s) with ``s``).
        ``x`` may be an image: its pixels, over its spatial axes by default
        (ops/fft_images.py).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def fill(self, out, value) -> Any:
        """
        Set every element of ``out`` (any view) to ``value``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def floor(self, x, *, out=...) -> Any:
        """
        Elementwise the largest whole number <= x (exact; integers as they are). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def floordiv(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a // b`` for int32/uint32 (``x // 0 == 0``), with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def frequency_encoding(self, x, n_frequencies, include_input=..., out=...) -> Any:
        """
        NeRF's positional encoding of ``x`` (float32 or float16, shape
        (..., d)): (..., d * (include_input + 2 n_frequencies)) values, the
        blocks ``x``, then ``sin(2**k pi x)``, ``cos(2**k pi x)`` for k = 0 ..
        n_frequencies - 1 (0 .. 64), each block the d coordinates (module notes
        of ops/encodings.py: layout, numpy reference, accuracy). ``out``:
        float32 or float16 (default: x's dtype), not overlapping ``x``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def gather(self, x, indices, axis=..., *, out=..., mode=...) -> Any:
        """
        ``numpy.take_along_axis(x, indices, axis)``: ``indices`` has x's
        number of dims; along ``axis`` it picks positions, the other dims
        broadcast against x's. Negative and out-of-range indices as in
        :func:`index_select`.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def gaussian_blur(self, img, sigma, out=..., *, radius=...) -> Any:
        """
        Gaussian blur of pixels (a tensor in a pixel layout, or an image /
        ``img.level(mip)``; see ops/pixels.py), separable: a horizontal pass
        into a float32 scratch, then a vertical pass into ``out``. ``radius``
        defaults to ``ceil(3 * sigma)``; borders clamp to the edge. ``out``
        (same size; a tensor of the same shape and dtype, or an image) may be
        ``img`` itself; for an image input it defaults to a new guest image.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def gelu(self, x, *, approximate=..., out=...) -> Any:
        """
        GELU, ``x * Phi(x)``. ``approximate="none"`` (default) is the erf form
        (|error| < 1e-6 against the exact value); ``"tanh"`` is
        ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def generate_mips(self, img, *, base=..., layer=...) -> Any:
        """
        Fill mip levels ``base + 1 ..`` of ``img`` from level ``base``: each
        level is the 2x2 box mean of the one above it (odd sizes average the
        texels each output pixel covers, as ``resize(filter="box")``). One
        dispatch per level; each reads the level its predecessor wrote, and
        the recorder orders them (the image stays in GENERAL throughout).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def greater(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a > b`` elementwise with broadcasting: 1 where it holds, else 0 (false where either is NaN); ``b`` may be a Python number. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def greater_equal(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a >= b`` elementwise with broadcasting: 1 where it holds, else 0 (false where either is NaN); ``b`` may be a Python number. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def groups_from_count(self, count, items_per_group, *, out=...) -> Any:
        """
        Workgroup counts ``(x, y, z)`` (a uint32 tensor of shape (3,)) of a
        dispatch covering ``count[0]`` items at ``items_per_group`` items per
        workgroup, computed on the GPU; feed it to ``rec.dispatch_indirect``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def hash_grid_encode(self, x, grid, out=...) -> Any:
        """
        Instant-NGP's hash-grid encoding of points ``x`` (float32, shape
        (..., grid.n_input_dims), coordinates in [0, 1], clamped) through
        ``grid`` (``ctx.hash_grid(...)``): shape (..., n_levels *
        n_features_per_level), level after level. ``out``: float32 or float16
        (default: the grid's dtype), overlapping neither ``x`` nor the grid's
        parameters. Semantics: ops/hash_grid_encode.py.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def histogram(self, x, bins=..., range=..., out=..., *, per_channel=..., packed=..., accumulate=...) -> Any:
        """
        Counts of ``x``'s values in ``bins`` equal bins over ``range = (lo,
        hi)``, as ``np.histogram(x, bins, range)[0]`` in uint32: the last bin
        includes ``hi``; values outside the range and NaN are not counted.

        ``x`` is float32, int32, uint32 or uint8 of any shape, or with
        ``packed=True`` a uint32 tensor of packed RGBA8 words (each word gives
        its four bytes). ``per_channel=False`` pools every value into
        ``(bins,)`` counts; ``per_channel=True`` counts RGBA channels apart into
        ``(4, bins)``: channel ``c`` of an unpacked ``(..., 4)`` tensor is the
        last index, of a packed word its byte ``c``. ``range`` defaults to
        ``(0, 256)`` for uint8 and packed input and is required otherwise. Bin
        positions are computed in float32 (exact for integers below 2**24).
        ``accumulate=True`` adds to ``out`` instead of overwriting it.

        An image (or ``img.level(mip)``) is histogrammed in the values a shader
        reads (0..1 for UNORM and sRGB, whose ``range`` defaults to (0, 1);
        floats need ``range``): it is first copied into a float32 scratch
        tensor, one extra pass.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def ifft(self, x, n=..., axis=..., norm=..., out=...) -> Any:
        """
        numpy.fft.ifft: the inverse DFT along ``axis``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def ifft2(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.ifft2 (``x`` may be an image, as for fft2).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def ifftn(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.ifftn (``x`` may be an image, as for fftn).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def index_select(self, x, indices, axis=..., *, out=..., mode=...) -> Any:
        """
        ``numpy.take(x, indices, axis)``: the result has shape
        ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``. ``indices`` is an
        int32 or uint32 tensor of any shape (or host data: a list or integer
        ndarray, checked here); negative indices count from the end. An index
        outside ``[-n, n)`` gives 0 (``mode="zero"``; host data raises
        :class:`IndexOutOfRangeError` instead), or follows numpy's
        ``mode="wrap"`` / ``mode="clip"``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def irfft(self, x, n=..., axis=..., norm=..., out=...) -> Any:
        """
        numpy.fft.irfft: the real length-``n`` (default 2 * (m - 1)) inverse of
        rfft, from complex64 ``x``'s first n // 2 + 1 values along ``axis``
        (float32, or float16 into a float16 ``out``).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def irfft2(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.irfft2 (``out`` may be an image, as for irfftn).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def irfftn(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.irfftn: ifft along all but the last of ``axes``, irfft along it.
        ``out`` may be an image with STORAGE usage: the result, of its pixels'
        shape, is copied into it (ops/fft_images.py).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def isfinite(self, x, *, out=...) -> Any:
        """
        numpy's ``isfinite``: 1 where it holds (integers: never NaN or infinite), else 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def isinf(self, x, *, out=...) -> Any:
        """
        numpy's ``isinf``: 1 where it holds (integers: never NaN or infinite), else 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def isnan(self, x, *, out=...) -> Any:
        """
        numpy's ``isnan``: 1 where it holds (integers: never NaN or infinite), else 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def layer_norm(self, x, weight=..., bias=..., *, eps=..., out=...) -> Any:
        """
        ``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis
        (biased variance, as in torch). ``weight``/``bias``: shape ``(x.shape[-1],)``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def less(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a < b`` elementwise with broadcasting: 1 where it holds, else 0 (false where either is NaN); ``b`` may be a Python number. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def less_equal(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a <= b`` elementwise with broadcasting: 1 where it holds, else 0 (false where either is NaN); ``b`` may be a Python number. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def log(self, x, *, out=...) -> Any:
        """
        Elementwise natural log (NaN below 0, -inf at 0; within 2 ulp). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def log_softmax(self, x, axis=..., *, out=...) -> Any:
        """
        ``(x - max) - log(sum(exp(x - max)))`` along ``axis``. ``out`` may be ``x``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def logical_and(self, a, b, *, out=...) -> Any:
        """
        numpy's ``logical_and`` elementwise with broadcasting: nonzero is true (NaN too), the result 1 or 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def logical_not(self, x, *, out=...) -> Any:
        """
        numpy's ``logical_not``: 1 where x is zero (either sign), else 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def logical_or(self, a, b, *, out=...) -> Any:
        """
        numpy's ``logical_or`` elementwise with broadcasting: nonzero is true (NaN too), the result 1 or 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def logical_xor(self, a, b, *, out=...) -> Any:
        """
        numpy's ``logical_xor`` elementwise with broadcasting: nonzero is true (NaN too), the result 1 or 0. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def luminance(self, img, out=..., *, key=..., limits=...) -> Any:
        """
        The exposure that maps ``img``'s log-average luminance to ``key``
        (middle grey): ``key / exp(mean(log(1e-4 + L)))``, into ``out`` (a
        one-element float32 tensor; allocated when omitted) — for
        ``rec.tonemap(img, exposure=out)`` in the same recording.
        ``limits=(lo, hi)`` clamps the exposure (an auto-exposure's range: a
        nearly black frame is not lifted to grey, a flash not crushed).

        ``L`` is the Rec. 709 luminance, negative values counted as 0. Pixels
        whose ``L`` is not finite (+inf from an overflowed HDR scene, NaN) are
        left out of the mean: one such pixel does not black out the frame. A
        frame with no finite pixel gets the exposure ``key`` (clamped to
        ``limits``).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def matmul(self, a, b, *, out=..., kernel=..., accumulate=...) -> Any:
        """
        ``out = a @ b`` with numpy.matmul semantics: the last two dims are
        matrices, leading (batch) dims broadcast, a 1-D ``a`` is a row vector
        and a 1-D ``b`` a column vector (that dim is dropped from the result).
        float32 or float16 (stored as fp16, accumulated in fp32 — in the
        device's accumulator type on the cooperative-matrix path), or int32
        (wrapping mod 2**32 as numpy's int32 matmul does). Operands may
        be any views (transposes, slices): they are read in place. ``out`` must
        not overlap ``a`` or ``b``. Allocates ``out`` when omitted. ``kernel``
        forces one of :data:`CANDIDATES` by name (benchmarks, tests).
        ``accumulate="float16"`` lets float16 products accumulate in fp16 where
        that is faster (the cooperative-matrix kernel: about 1.7× on an H200,
        with about 10× the rounding error); the default keeps fp32 accumulators.
        The KHR cooperative-matrix kernel (float16 on a device that has it;
        sizes that are not whole blocks run on padded copies where that pays)
        is specialized to K and the row strides: the first product of each
        shape creates a pipeline, so record each shape once at load time.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def max(self, x, axis=..., *, keepdims=..., out=...) -> Any:
        """
        Maximum over ``axis`` (int, tuple or None = all); NaN propagates. ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def maximum(self, a, b, *, out=...) -> Any:
        """
        elementwise maximum, NaN-propagating like numpy, with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def mean(self, x, axis=..., *, keepdims=..., out=...) -> Any:
        """
        Mean over ``axis`` (int, tuple or None = all); float dtypes only. ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def min(self, x, axis=..., *, keepdims=..., out=...) -> Any:
        """
        Minimum over ``axis`` (int, tuple or None = all); NaN propagates. ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def minimum(self, a, b, *, out=...) -> Any:
        """
        elementwise minimum, NaN-propagating like numpy, with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def mlp(self, x, net, *, out=..., kernel=...) -> Any:
        """
        ``out = net(x)``: the network of ``ctx.mlp`` over the last axis of
        ``x`` (a float16/float32 tensor (..., in), or an image's pixels), in
        one dispatch. ``out``: a float16/float32 tensor (..., out) or an image
        of x's size (see the module notes); allocated when omitted. ``kernel``
        forces one of :data:`CANDIDATES` by name (benchmarks, tests).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def mul(self, a, b, *, out=...) -> Any:
        """
        ``out = a * b`` elementwise with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted. complex64: either operand (or a Python complex ``b``) makes the result complex64 (numpy's promotion, uint8 tensors included; int32/uint32 tensors with complex, and uint8 ones with a complex scalar, raise DTypeError), see ops/complex_math.py.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def neg(self, x, *, out=...) -> Any:
        """
        Elementwise -x (uints wrap, as in numpy). Allocates ``out`` when omitted. complex64: both parts negated.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def nonzero(self, mask, *, count=..., out=..., out_count=...) -> Any:
        """
        The flat (C-order) indices where ``mask`` is nonzero, in increasing
        order (numpy's ``np.flatnonzero(mask)``), as uint32 (``out`` may be
        uint32 or int32), and their number: returns ``(indices, n)`` like
        :func:`compact`, with the same ``count``, ``out_count`` and mask rules.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def not_equal(self, a, b, *, out=...) -> Any:
        """
        numpy's ``a != b`` elementwise with broadcasting: 1 where it holds, else 0 (false where either is NaN, except not_equal: true); ``b`` may be a Python number. A uint8 mask.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def permute(self, x, axes, *, out=...) -> Any:
        """
        ``x`` with its axes reordered, materialised (``x.permute`` is the view).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def pow(self, a, b, *, out=...) -> Any:
        """
        ``a ** b`` (numpy's rules for negative bases; ints wrap; float32 within 8 ulp, exact for b = 1, 2 and as sqrt / div for 0.5 / -1, correctly rounded for other whole |b| <= 64 with results within 2**±100), with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def relu(self, x, *, out=...) -> Any:
        """
        Elementwise max(x, 0) (NaN stays NaN). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def resize(self, img, out=..., *, size=..., filter=...) -> Any:
        """
        Resample image ``img`` (an Image or ``img.level(mip)``) to ``out``'s
        extent, or to ``size`` = (width, height) in a new guest image of the same
        format. ``filter``: ``"linear"`` (bilinear through a sampler, texel
        centres aligned, edges clamped; the format must support linear
        filtering) or ``"box"`` (the mean of the source texels whose centres
        fall inside each output pixel, a centre on a pixel boundary counting
        for both: exact area averaging for integer downscales; where no centre
        falls inside, as in upscaling, the texel under the pixel's centre, so
        box upscaling is nearest-neighbour). ``out`` may also be a float32
        tensor.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def rfft(self, x, n=..., axis=..., norm=..., out=...) -> Any:
        """
        numpy.fft.rfft: the DFT of float32 or float16 ``x``, its n // 2 + 1 non-negative frequencies.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def rfft2(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.rfft2 (``x`` may be an image, as for fft2).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def rfftn(self, x, s=..., axes=..., norm=..., out=...) -> Any:
        """
        numpy.fft.rfftn: rfft along the last of ``axes``, fft along the others
        (``x`` may be an image, as for fftn).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def rint(self, x, *, out=...) -> Any:
        """
        Elementwise x rounded to the nearest whole number, halves to even (exact). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def rms_norm(self, x, weight=..., *, eps=..., out=...) -> Any:
        """
        ``x / sqrt(mean(x²) + eps) * weight`` over the last axis.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def rsqrt(self, x, *, out=...) -> Any:
        """
        Elementwise 1 / sqrt(x) (NaN below 0, ±inf at ±0). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def run_kernel(self, kernel, buffers=..., *, push=..., groups=...) -> Any:
        """
        Record a user kernel (from ``ctx.kernel``): ``buffers`` is one
        resource per binding, in binding order — a tensor for a storage buffer,
        an Image or ``img.level(mip, layer)`` for an ``image2D`` or
        ``texture2D``, the same or ``(image, "linear")`` for a ``sampler2D``,
        ``"nearest"`` / ``"linear"`` for a ``sampler``; ``push`` the push
        constants (bytes, numpy data, or a dict with the kernel's
        ``push_layout``), exactly the reflected size; ``groups`` the workgroup
        counts (x[, y[, z]]).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def scale(self, x, factor, *, out=...) -> Any:
        """
        ``out = factor * x`` for a Python number ``factor``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def segmented_cumsum(self, x, starts, *, exclusive=..., out=...) -> Any:
        """
        Prefix sums of each segment of 1-D ``x`` (float32, int32, uint32):
        ``starts`` (uint8, uint32 or int32, the shape of ``x``) is nonzero at
        the first element of each segment; element 0 always starts one. Each
        segment's result is numpy's ``np.cumsum`` of it (integers wrap in their
        dtype); ``exclusive=True`` puts the sum of the segment's *preceding*
        elements at each position (0 at each start). ``out`` may be ``x``
        itself but must not partially overlap it.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sigmoid(self, x, *, out=...) -> Any:
        """
        Elementwise 1 / (1 + e**-x) (within 3 ulp). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sign(self, x, *, out=...) -> Any:
        """
        Elementwise -1, 0 or 1 by the sign of x (NaN stays NaN; -0.0 gives +0.0, as numpy). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def silu(self, x, *, out=...) -> Any:
        """
        Elementwise x * sigmoid(x) (within 3 ulp). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sin(self, x, *, out=...) -> Any:
        """
        Elementwise sine (within 2 ulp for every float32). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def slice(self, x, index, *, out=...) -> Any:
        """
        ``x[index]`` (basic indexing: ints, slices with steps, None,
        Ellipsis) materialised as a contiguous tensor.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def softmax(self, x, axis=..., *, out=...) -> Any:
        """
        ``exp(x - max) / sum(exp(x - max))`` along ``axis``. ``out`` may be ``x``.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sort(self, keys, values=..., out_keys=..., out_values=..., *, key_bits=..., count=...) -> Any:
        """
        Stable sort of 1-D ``keys`` (uint32, int32, float32, float16 or uint64),
        carrying the optional 1-D payload ``values`` (any 4-byte dtype) along.

        Returns ``sorted_keys``, or ``(sorted_keys, permuted_values)`` with a
        payload; the payload order is numpy's ``values[np.argsort(keys,
        kind="stable")]``. ``key_bits`` (default: the keys' width) below it
        sorts uint32 or uint64 keys known to be below ``2**key_bits`` in fewer
        passes (higher bits are ignored).
        Outputs may be the inputs themselves (in place). Float keys sort as in
        numpy: -0.0 and +0.0 compare equal (input order kept) and every NaN
        comes last (see the module notes).

        ``count``: a 1-element uint32/int32 GPU tensor written earlier in the
        recording (by ``rec.compact``, a user kernel): only the first
        ``count[0]`` keys (clamped to 0..size) are sorted, with no read-back;
        the outputs past them are left as they were.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sqrt(self, x, *, out=...) -> Any:
        """
        Elementwise square root (NaN below 0). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sub(self, a, b, *, out=...) -> Any:
        """
        ``out = a - b`` elementwise with numpy broadcasting; ``b`` may be a Python number. Allocates ``out`` when omitted. complex64: either operand (or a Python complex ``b``) makes the result complex64 (numpy's promotion, uint8 tensors included; int32/uint32 tensors with complex, and uint8 ones with a complex scalar, raise DTypeError), see ops/complex_math.py.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def sum(self, x, axis=..., *, keepdims=..., out=...) -> Any:
        """
        Sum over ``axis`` (int, tuple or None = all); ints wrap, float16 accumulates in fp32. ``keepdims`` keeps reduced axes as size 1. Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def tanh(self, x, *, out=...) -> Any:
        """
        Elementwise hyperbolic tangent (within 2 ulp). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def tonemap(self, img, out=..., *, exposure=..., curve=..., srgb=..., gamma=...) -> Any:
        """
        Tone-map HDR ``img`` (an image or a float32 pixel tensor, linear
        light) into ``out`` (an image — sRGB formats encode themselves — or a
        float32 tensor; default: a new rgba8_unorm Image with sRGB encoding).
        ``exposure``: a number or a one-element float32 tensor (e.g. from
        ``rec.luminance``), multiplied in on the GPU. ``curve``: "aces",
        "reinhard" or "none"; +inf and huge values map to white.

        The output encoding: ``srgb=True`` encodes sRGB in the shader (a UNORM
        target shown as sRGB, e.g. a BGRA8_UNORM swapchain), ``gamma=2.2``
        applies a power curve instead, ``srgb=False`` stores linear values. A
        UNORM image ``out`` needs one of the three said: linear values in an
        8-bit display image look dark, so the choice is not guessed. Float
        targets default to linear; sRGB images encode in their store.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def transpose(self, x, axis0=..., axis1=..., *, out=...) -> Any:
        """
        ``x`` with two axes swapped, materialised (``x.transpose`` is the view).

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def trunc(self, x, *, out=...) -> Any:
        """
        Elementwise x rounded toward zero (exact; integers as they are). Allocates ``out`` when omitted.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """

    def where(self, cond, a, b, *, out=...) -> Any:
        """
        ``cond ? a : b`` elementwise with numpy broadcasting over all three.
        ``cond`` is any dtype (nonzero is true, NaN included); ``a`` and ``b``
        share a dtype and one of them may be a Python number.

        Thread-safety: the recorder's own thread only; tensors may be shared between threads.
        """
