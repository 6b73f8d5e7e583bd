"""Particles on a strange attractor, simulated by guestcompute inside a
Vulkan renderer's frame and drawn in the same command buffer.

Per frame, one command buffer and one submit:

    guest: advance the particles, write the host's vertex buffers   (before the pass)
           and step a water simulation, shading it into the host's
           backdrop texture
    host:  draw the backdrop texture, then the particles as additive
           point sprites into an rgba16f scene image                 (render pass)
    guest: bloom + auto-exposure + tonemap of the scene straight      (resolve)
           into the output image (swapchain or offscreen)
    host:  present / read back

``--grade`` adds a learned colour grade to the HDR routes: a small MLP,
trained with numpy at start-up to imitate a teal-and-orange look
(demos/grade.py), takes the tone-mapped frame into the output in one
``rec.mlp`` dispatch; the last frame is checked against numpy at exit.

``--bloom-route image`` / ``buffer`` run the older 8-bit routes instead
(bloom of the rendered image itself, or of a copy of it in a buffer).

``--sorted`` draws the particles as translucent sprites with "over" blending
instead of additive light, which needs them back to front: between the
simulation and the pass the guest argsorts their view depths into the
host's index buffer every frame (demos/depth_sort.py), and the summary
shows the GPU time that sort costs.

Run ``python -m demos.particles`` or ``python demos/particles.py`` (a window; headless
without a display) or
``python -m demos.particles --headless --frames 60 --screenshot out/particles.png``.

``--watch`` compiles the simulation's kernels from their files and reloads
them whenever one is saved: edit ``demos/kernels/lorenz.comp`` or
``ripples.comp`` while the demo runs and the next frame shows it; an edit
that does not compile is printed at its line and the last good kernel
keeps running.
"""
from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    # Run as a file (python demos/particles.py) rather than as a module: import the demos
    # as the package they are, from the repository root (PEP 366).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "demos"

from .app import GuestApp, parser, report, resolve_mode
from .attractor import LorenzParticles
from .bloom import make_bloom
from .depth_sort import SCOPE as SORT_SCOPE
from .depth_sort import DepthSort
from .fft_bloom import FftBloomPostProcess
from .grade import ColourGrade
from .grade import train as train_grade
from .hdr import HdrPostProcess
from .ripples import Ripples

ROUTES = ("auto", "hdr", "fft", "image", "buffer")


def make_post_process(app, args, grade=None):
    """The post-process for the renderer's current frame size, or None."""
    if args.no_bloom:
        return None
    if app.renderer.hdr:
        route = FftBloomPostProcess if args.bloom_route == "fft" else HdrPostProcess
        return route(app.ctx, app.renderer, direct=args.direct, grade=grade)
    return make_bloom(app.ctx, app.renderer, direct=args.direct, route=args.bloom_route)


def run(args):
    resolve_mode(args)
    params = start_grade(args)
    app = GuestApp(args, "guestcompute particles", hdr=not args.no_bloom and args.bloom_route in ("auto", "hdr", "fft"),
                   blend="over" if args.sorted else "additive")
    try:
        renderer = app.renderer
        if renderer.hdr and not HdrPostProcess.supported(renderer):
            raise SystemExit("the renderer's HDR scene images allow no compute use")
        count, buffers = app.particle_buffers(args, indexed=args.sorted)
        sim = LorenzParticles(app.ctx, count, buffers.positions, buffers.colors, renderer.extent, watch=args.watch)
        sort = DepthSort(app.ctx, sim.positions, buffers.indices, count) if args.sorted else None
        ripples = None if args.no_ripples else Ripples(app.ctx, renderer, watch=args.watch)
        grade = ColourGrade(app.ctx, params) if params is not None else None

        def before_pass(cmd, frame):
            sim.extent = renderer.extent            # follows window resizes

            def guest(rec):
                sim.record(rec, frame)
                if sort is not None:
                    sort.record(rec)            # reads the depths the simulation just wrote
                if ripples is not None:
                    ripples.record(rec, frame)
            app.record(cmd, guest)

        post = make_post_process(app, args, grade)
        if post is None:
            print("post-process: none" + ("" if args.no_bloom else " (the render target allows neither image "
                                                                  "ops nor copies to buffers)"))
        else:
            route = f"{type(post).__name__}" + (
                f", {'into the output' if post.writes_output else 'through the scene and a host blit'}"
                if isinstance(post, HdrPostProcess) else "")
            print(f"post-process: {route}")

        def current():
            nonlocal post
            if post.extent != renderer.extent:      # the window was resized
                post.destroy()
                post = make_post_process(app, args, grade)
            return post

        def after_pass(cmd, frame):
            p = current()
            if isinstance(p, HdrPostProcess):
                p.record_after_pass(cmd, app)
            else:
                p.record(cmd, app)

        def resolve(cmd, frame):
            current().record_resolve(cmd, app)

        hdr_resolve = isinstance(post, HdrPostProcess) and post.writes_output
        frames = app.run(args.frames, before_pass, after_pass if post is not None else None,
                         status=lambda: f"{count:,} particles", resolve=resolve if hdr_resolve else None)
        renderer.wait_idle()
        edited = [k.name for k in (sim.kernel, ripples and ripples.kernel) if k and k.version]
        if edited:
            print(f"not compared with numpy: {', '.join(edited)} changed while running (--watch)")
        elif frames:
            # The host's position buffer holds the projection of the guest's state.
            error = abs(sim.positions.numpy() - sim.expected_positions(frames - 1)).max()
            print(f"max |position buffer - numpy| over {count:,} particles: {error:.2e}")
            if error > 1e-4:
                raise SystemExit("positions differ from numpy")
            if ripples is not None:
                error = abs(ripples.heights(frames) - ripples.expected_heights(frames)).max()
                print(f"max |ripple heights - numpy| over {ripples.size[0]}x{ripples.size[1]} cells: {error:.2e}")
                if error > 1e-4:
                    raise SystemExit("ripple heights differ from numpy")
            if sort is not None:
                report_depth_sort(sort, app.scope_median_ms(SORT_SCOPE))
            if grade is not None:
                report_grade(app, grade, post)
    except BaseException:
        app.close()
        raise
    return app.finish(args.screenshot)


def start_grade(args):
    """The grade's trained weights (None without ``--grade``)."""
    if not args.grade:
        return None
    if args.no_bloom or args.bloom_route not in ("auto", "hdr", "fft"):
        raise SystemExit("--grade grades the HDR routes' tone-mapped frame: use --bloom-route hdr or fft")
    params, rmse, seconds = train_grade()
    print(f"colour grade: 3 → 16 → 16 → 3 MLP trained in {seconds:.2f} s (rms error {rmse:.3f} against "
          "the target look)")
    return params


def report_grade(app, grade: ColourGrade, post: HdrPostProcess) -> None:
    """Check the last graded frame against numpy evaluating the same net on
    the same tone-mapped pixels (read back while the context is open)."""
    renderer = app.renderer
    shown = renderer.last_frame_rgba() if renderer.headless else None
    error = grade.check(app.ctx, post.ldr, shown, post.srgb_store)
    size = f"{post.extent[0]}x{post.extent[1]} pixels ({grade.dtype} weights)"
    if shown is not None:
        print(f"max |graded output - numpy| over {size}: {error:.2e}")
    else:
        print(f"max |rec.mlp of the last tone-mapped frame - numpy| over {size}: {error:.2e} "
              "(a window: the output is not read back)")
    if error > grade.limit(shown is not None):
        raise SystemExit("graded colours differ from numpy")


def report_depth_sort(sort: DepthSort, ms: float | None) -> None:
    """Print the sort's GPU time (median ms) and check the last frame's draw order."""
    cost = f"GPU {ms:.3f} ms/frame (median)" if ms is not None else "GPU time not measured (no timestamps)"
    print(f"depth sort: {sort.count:,} particles back to front every frame, {cost}")
    wrong = sort.check()
    if wrong:
        raise SystemExit(f"draw order is not back to front: {wrong}")
    print(f"draw order of the last frame: back to front, equal to numpy's stable argsort of {sort.count:,} depths")


def parse_args(argv=None):
    p = parser("demos.particles", __doc__)
    p.add_argument("--no-bloom", action="store_true", help="skip the guest post-process pass")
    p.add_argument("--bloom-route", choices=ROUTES, default="auto",
                   help="hdr: the renderer draws into an rgba16f scene that the guest blooms, exposes and "
                        "tone-maps into the output; fft: the same with the bloom a convolution through the "
                        "FFT (rfft2, a cached kernel spectrum, irfft2); image: bloom of the 8-bit rendered image itself; "
                        "buffer: of a copy of it in a buffer (default: hdr)")
    p.add_argument("--no-ripples", action="store_true",
                   help="no guest-simulated water surface as the renderer's backdrop texture")
    p.add_argument("--sorted", action="store_true",
                   help="translucent particles with 'over' blending, sorted back to front on the GPU every frame")
    p.add_argument("--grade", action="store_true",
                   help="a learned teal-and-orange colour grade after the tone map: an MLP trained with numpy at "
                        "start-up, run per pixel by rec.mlp (HDR routes)")
    p.add_argument("--direct", action="store_true",
                   help="record the post-process op by op every frame instead of replaying a program")
    p.add_argument("--watch", action="store_true",
                   help="reload the simulation kernels (demos/kernels/lorenz.comp, ripples.comp) whenever they "
                        "are saved: edit them while the demo runs (needs glslc)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result = run(args)
    return report("particles", result, args.validation, args.screenshot)


if __name__ == "__main__":
    sys.exit(main())
