"""Movies: a figure redrawn frame by frame, written as a GIF (pillow) and an MP4 (ffmpeg, if found).

Frames are rendered once with the Agg canvas (no pyplot, no backend switch) and go to both
encoders (and, if asked, each to a PNG file of its own).  ffmpeg is the one on PATH, else the
executable the imageio-ffmpeg package bundles (:func:`ffmpeg_executable`).  GIF frames are
reduced to 256 colours as they come, so memory stays small; note that pillow merges consecutive
identical frames (their durations add up).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

log = logging.getLogger(__name__)

MAX_FRAMES = 120
FPS = 8.0


def ffmpeg_executable() -> str | None:
    """An ffmpeg executable: ``ffmpeg`` on PATH, else imageio-ffmpeg's bundled one, else None."""
    found = shutil.which("ffmpeg")
    if found is not None:
        return found
    try:
        import imageio_ffmpeg
    except ImportError:
        return None
    try:
        return str(imageio_ffmpeg.get_ffmpeg_exe())
    except RuntimeError:  # the package without a binary for this platform
        return None


def frame_indices(count: int, max_frames: int = MAX_FRAMES) -> np.ndarray:
    """At most ``max_frames`` of ``range(count)``, evenly spread, first and last included."""
    if count <= max_frames:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, max(max_frames, 2))).astype(int))


def _to_palette(image: Image.Image) -> Image.Image:
    """The frame in 256 colours of its own (median cut), dithered: colours that cover few pixels
    (the top of a colour bar) would otherwise collapse into visible bands."""
    return image.quantize(palette=image.quantize(256), dither=Image.Dither.FLOYDSTEINBERG)


class _FFmpeg:
    """An ffmpeg process encoding raw RGB frames from its stdin into an H.264-compatible MP4."""

    def __init__(self, executable: str, path: Path, width: int, height: int, fps: float) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [executable, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
             "-s", f"{width}x{height}", "-framerate", f"{fps:g}", "-i", "-",
             "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-pix_fmt", "yuv420p", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.failed = False

    def write(self, rgb: np.ndarray) -> None:
        assert self.proc.stdin is not None  # opened with stdin=PIPE
        if not self.failed:
            try:
                self.proc.stdin.write(np.ascontiguousarray(rgb).tobytes())
            except BrokenPipeError:
                self.failed = True

    def close(self) -> bool:
        """Finish the file; False (and a warning) when ffmpeg failed."""
        _, err = self.proc.communicate()
        if self.failed or self.proc.returncode != 0:
            log.warning("ffmpeg failed, %s not written: %s", self.path, err.decode(errors="replace").strip())
            self.path.unlink(missing_ok=True)
            return False
        return True


def write_movie(figure: Figure, update: Callable[[int], None], frames: Iterable[int], stem: str | Path, *,
                fps: float = FPS, dpi: float = 100, mp4: bool = True, frame_files: bool = False) -> list[Path]:
    """Call ``update(i)`` for each frame index and record the figure after each call.

    Parameters
    ----------
    figure
        The figure to record; ``update`` changes its artists (keep the colour scale fixed).
    update
        Draws frame ``i``.
    frames
        Frame indices passed to ``update``, in order.
    stem
        Output path without suffix: ``stem.gif``, and ``stem.mp4`` when ``mp4`` and an
        ffmpeg executable is found (:func:`ffmpeg_executable`; else a logged note).
    fps, dpi
        Frame rate and resolution.
    frame_files
        Also write every frame as ``stem_frameNNNN.png`` (NNNN counts the frames from 0).

    Returns
    -------
    list of Path
        The files written.
    """
    stem = Path(stem)
    ffmpeg = ffmpeg_executable() if mp4 else None
    if mp4 and ffmpeg is None:
        log.warning("no ffmpeg (on PATH or from imageio-ffmpeg): %s.mp4 not written (the GIF is)", stem)
    figure.set_dpi(dpi)
    canvas = FigureCanvasAgg(figure)
    images: list[Image.Image] = []
    encoder: _FFmpeg | None = None
    pngs: list[Path] = []
    for i in frames:
        update(i)
        canvas.draw()
        if not images:  # freeze the first frame's layout: titles that change must not move the axes
            figure.set_layout_engine("none")
        rgb = np.asarray(canvas.buffer_rgba())[..., :3]
        images.append(_to_palette(Image.fromarray(rgb)))
        if frame_files:
            pngs.append(stem.with_name(f"{stem.name}_frame{len(pngs):04d}.png"))
            Image.fromarray(rgb).save(pngs[-1])
        if ffmpeg is not None:
            encoder = encoder or _FFmpeg(ffmpeg, stem.with_suffix(".mp4"), rgb.shape[1], rgb.shape[0], fps)
            encoder.write(rgb)
    if not images:
        raise ValueError("a movie needs at least one frame")
    gif = stem.with_suffix(".gif")
    images[0].save(gif, save_all=True, append_images=images[1:], duration=1000.0 / fps, loop=0)
    written = [gif]
    if encoder is not None and encoder.close():
        written.append(encoder.path)
    return written + pngs
