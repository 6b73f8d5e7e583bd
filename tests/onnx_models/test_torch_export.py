"""Models exported by ``torch.onnx.export`` — an MLP, a conv net, a
NeRF-style MLP, an image upscaler, a transformer block and a U-Net
denoiser — loaded with gc.onnx.load, run, and
compared with onnxruntime on the CPU: float32 models to a tight tolerance, a
float32 model bound with mlp="float16" to the fused MLP's fp16 one. Each
through both of torch's exporters: the TorchScript one at opset 17 (where the
installed torch still has it) and the ``torch.export`` one, torch's default,
at its own opset (it needs onnxscript). Skipped where torch or onnxruntime is
missing."""
import importlib.util
import inspect
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import guestcompute as gc  # noqa: E402

TORCHSCRIPT_OPSET = 17
F32 = dict(rtol=1e-4, atol=1e-4)


class Mlp(torch.nn.Module):
    """32 -> 64 -> 64 -> 16 with ReLU: nn.Linear on a 2-D input exports as Gemm (transB=1)."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                       torch.nn.ReLU(), torch.nn.Linear(64, 16))

    def forward(self, x):
        return self.net(x)


class ConvNet(torch.nn.Module):
    """Conv2d (padded) + ReLU + MaxPool2d + Flatten + Linear over (N, 3, 8, 8)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        h = self.pool(torch.relu(self.conv(x)))
        return self.head(torch.flatten(h, 1))


class Nerf(torch.nn.Module):
    """Positions through two layers, concatenated back in (the skip), a
    SiLU layer (exported as Mul(h, Sigmoid(h))), and a linear head."""

    def __init__(self, width=32):
        super().__init__()
        self.a = torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.ReLU(),
                                     torch.nn.Linear(width, width), torch.nn.ReLU())
        self.b = torch.nn.Sequential(torch.nn.Linear(width + 3, width), torch.nn.SiLU(), torch.nn.Linear(width, 4))

    def forward(self, x):
        return self.b(torch.cat([self.a(x), x], dim=-1))


class Upscaler(torch.nn.Module):
    """An image network's eval-mode nodes: Conv2d + BatchNorm2d + Hardswish,
    a reflect-padded depthwise Conv2d, a squeeze-and-excitation style gate
    (mean over the image, Sigmoid, Mul), ConvTranspose2d (stride 2) and a
    PixelShuffle: (N, 3, H, W) -> (N, 3, 4H, 4W)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                        torch.nn.Hardswish())
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect", groups=8)
        self.up = torch.nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1)
        self.head = torch.nn.Conv2d(8, 12, 3, padding=1)
        self.shuffle = torch.nn.PixelShuffle(2)
        with torch.no_grad():             # statistics that are not the identity
            self.stem[1].running_mean.uniform_(-0.2, 0.2)
            self.stem[1].running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        h = self.depthwise(self.stem(x))
        h = h * torch.sigmoid(h.mean(dim=(2, 3), keepdim=True))
        return torch.sigmoid(self.shuffle(self.head(self.up(h))))


class TransformerBlock(torch.nn.Module):
    """A pre-norm transformer block over (N, tokens, 32): LayerNorm, a
    4-head attention written out (Linear to q, k, v, reshape, permute,
    q @ k^T, Softmax, @ v), and an exact-GELU MLP (the TorchScript exporter
    writes nn.GELU as Div, Erf, Add, Mul, Mul; torch.export as Gelu)."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x):
        n, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(n, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / (w // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((weights @ v).transpose(1, 2).reshape(n, t, w))
        return x + self.mlp(self.norm2(x))


class UNetDenoiser(torch.nn.Module):
    """A two-level U-Net: Conv2d + GroupNorm + SiLU, a strided Conv2d down,
    LeakyReLU, a bilinear 2x upsample (align_corners=False), the skip
    concatenated, and the input added back (a residual denoiser)."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.GroupNorm(4, 16),
                                       torch.nn.SiLU())
        self.down = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.GroupNorm(8, 32),
                                        torch.nn.SiLU(), torch.nn.Conv2d(32, 32, 3, padding=1),
                                        torch.nn.LeakyReLU(0.1))
        self.dec = torch.nn.Conv2d(48, 16, 3, padding=1)
        self.out = torch.nn.Conv2d(16, 3, 1)

    def forward(self, x):
        skip = self.enc(x)
        up = torch.nn.functional.interpolate(self.down(skip), scale_factor=2, mode="bilinear", align_corners=False)
        return x + self.out(torch.relu(self.dec(torch.cat([up, skip], dim=1))))


def exporters():
    """The exporters this torch offers: "torchscript" (``dynamo=False``) and
    "dynamo" (``torch.export``, which needs onnxscript)."""
    names = ["torchscript"]
    if "dynamo" in inspect.signature(torch.onnx.export).parameters and importlib.util.find_spec("onnxscript"):
        names.append("dynamo")
    return names


@pytest.fixture(params=["torchscript", "dynamo"])
def exporter(request):
    if request.param not in exporters():
        pytest.skip(f"this torch ({torch.__version__}) has no {request.param} exporter here")
    return request.param


def export(module, example, path, dynamic_batch: bool, exporter: str):
    """``module`` exported to ``path`` with input "x" and output "y"; the
    batch axis symbolic where ``dynamic_batch``."""
    module.eval()
    kwargs = dict(input_names=["x"], output_names=["y"])
    if exporter == "dynamo":
        kwargs.update(dynamo=True, dynamic_shapes=({0: torch.export.Dim("batch")},) if dynamic_batch else None)
    else:
        kwargs["opset_version"] = TORCHSCRIPT_OPSET
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False
        if dynamic_batch:
            kwargs["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # each exporter's deprecation and constant-folding notes
        torch.onnx.export(module, (example,), str(path), **kwargs)
    return str(path)


def made(cls, seed=0):
    torch.manual_seed(seed)
    return cls()


def onnxruntime_y(path, x):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def linear_node_names(path):
    import onnx
    return {n.name or n.output[0] for n in onnx.load(path).graph.node if n.op_type in ("Gemm", "MatMul")}


def fused_names(bound):
    return {name for chain in bound.fused for name in chain}


def check_mlp(ctx, path):
    x = np.random.default_rng(0).normal(size=(37, 32)).astype(np.float32)
    model = gc.onnx.load(path)
    assert [(i.name, i.dtype) for i in model.inputs] == [("x", "float32")]
    bound = model.bind(ctx, x=(37, 32))
    assert len(bound.fused) == 1 and linear_node_names(path) <= fused_names(bound)
    want = onnxruntime_y(path, x)
    y = bound.run(x=x)["y"]
    assert y.shape == (37, 16)
    np.testing.assert_allclose(y, want, **F32)
    np.testing.assert_allclose(model.bind(ctx, x=(37, 32), mlp="off").run(x=x)["y"], want, **F32)
    y16 = model.bind(ctx, x=(37, 32), mlp="float16").run(x=x)["y"]
    assert np.abs(y16 - want).max() <= 2e-2 * max(1.0, float(np.abs(want).max()))


def check_conv_net(ctx, path):
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    bound = gc.onnx.load(path).bind(ctx, x=(2, 3, 8, 8))
    assert linear_node_names(path) <= fused_names(bound)          # the 64 -> 10 head
    y = bound.run(x=x)["y"]
    assert y.shape == (2, 10)
    np.testing.assert_allclose(y, onnxruntime_y(path, x), **F32)


def check_nerf(ctx, path):
    x = np.random.default_rng(2).uniform(-1, 1, size=(50, 3)).astype(np.float32)
    bound = gc.onnx.load(path).bind(ctx, x=(50, 3))
    assert len(bound.fused) == 2 and linear_node_names(path) <= fused_names(bound)
    y = bound.run(x=x)["y"]
    assert y.shape == (50, 4)
    np.testing.assert_allclose(y, onnxruntime_y(path, x), **F32)


def check_against_onnxruntime(ctx, path, x, shape):
    """The model bound for ``x``'s shape gives ``shape`` and onnxruntime's values."""
    y = gc.onnx.load(path).bind(ctx, x=x.shape).run(x=x)["y"]
    assert y.shape == shape
    np.testing.assert_allclose(y, onnxruntime_y(path, x), **F32)


def check_upscaler(ctx, path):
    x = np.random.default_rng(3).normal(size=(1, 3, 12, 10)).astype(np.float32)
    check_against_onnxruntime(ctx, path, x, (1, 3, 48, 40))


def test_exported_mlp(ctx, tmp_path, exporter):
    check_mlp(ctx, export(made(Mlp), torch.zeros(4, 32), tmp_path / "mlp.onnx", dynamic_batch=True,
                          exporter=exporter))


def test_exported_conv_net(ctx, tmp_path, exporter):
    check_conv_net(ctx, export(made(ConvNet), torch.zeros(2, 3, 8, 8), tmp_path / "conv.onnx", dynamic_batch=False,
                                 exporter=exporter))


def test_exported_nerf_with_skip_concat(ctx, tmp_path, exporter):
    check_nerf(ctx, export(made(Nerf), torch.zeros(5, 3), tmp_path / "nerf.onnx", dynamic_batch=True,
                           exporter=exporter))


def test_exported_upscaler_with_batch_norm_transposed_conv_and_pixel_shuffle(ctx, tmp_path, exporter):
    check_upscaler(ctx, export(made(Upscaler), torch.zeros(1, 3, 12, 10), tmp_path / "up.onnx",
                               dynamic_batch=False, exporter=exporter))


def test_exported_transformer_block(ctx, tmp_path, exporter):
    x = np.random.default_rng(4).normal(size=(2, 10, 32)).astype(np.float32)
    path = export(made(TransformerBlock), torch.zeros(2, 10, 32), tmp_path / "block.onnx", dynamic_batch=False,
                  exporter=exporter)
    check_against_onnxruntime(ctx, path, x, (2, 10, 32))


def test_exported_unet_denoiser(ctx, tmp_path, exporter):
    x = np.random.default_rng(5).uniform(0, 1, size=(1, 3, 16, 12)).astype(np.float32)
    path = export(made(UNetDenoiser), torch.zeros(1, 3, 16, 12), tmp_path / "unet.onnx", dynamic_batch=False,
                  exporter=exporter)
    check_against_onnxruntime(ctx, path, x, (1, 3, 16, 12))
