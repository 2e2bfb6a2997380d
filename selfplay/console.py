"""The terminal of a command: the project's own output there, the libraries' in a log file.

A run's terminal used to fill with what vLLM, transformers and torch print (engine start,
NUMA binding, weight-sync warnings at every step, deprecations), and a long phase printed
nothing at all. While a console is open (`Console`, a context manager):

* `sys.stdout` and `sys.stderr` write where they wrote when the console opened (the terminal,
  or the stream a caller put there: a notebook's, pytest's capture, a `StringIO`), so what
  the project prints (its step lines, notices, a crash's traceback) shows there;
* file descriptors 1 and 2 write to the log file (`run.log` in a run folder), so whatever writes
  to them directly lands there: torch's C++ warnings, an engine in a child process, the
  sandbox workers' error output;
* log records go to the log file: INFO and up (DEBUG and up with level DEBUG). On the terminal
  are the project's own (`selfplay.*`) from WARNING, and the libraries' from `level` when one
  is given ('' shows none of them). vLLM is told not to set up its own logging
  (`VLLM_CONFIGURE_LOGGING=0`), and vLLM's and transformers' loggers lose their own handlers
  and hand their records on like any other library's; transformers' progress bars are off;
* Python warnings are log records (`logging.captureWarnings`), so they go to the log file;
* an exception that leaves the console carries a note naming the log file, which Python prints
  under its traceback (and the CLI under its one-line error).

A command that fails before it wrote anything but the log (a model name that does not load, a
configuration error found late) leaves no empty shell of a folder behind: where the console
made the log's folder itself and, when the exception leaves it, the folder holds nothing but
the log, the log's last `TAIL_LINES` lines are printed on the terminal's standard error, then
the log and the folders the console made are removed, and the exception's note says so. A
folder that was there before, or that holds anything else (a run's config.yaml, its pool),
is kept with its log, whatever happens.

An engine core that vLLM starts in a child process (`engine.vllm_in_process=false`) does not
set up its logging either: its warnings and errors reach the log file through descriptor 2,
its INFO records are dropped.

`bar(total)` is the progress bar of a long phase (tqdm) on the terminal's standard error,
labelled with the current `activity` ("step 3/20 solve"; `doing("eval cruxeval_o")`): redrawn
in place on a terminal; where standard error is no terminal (CI, nohup) a plain line every
`LINE_EVERY_S` seconds and a last one at the end, and nothing for a phase shorter than that.
Both are drawn again while nothing moves on, so that the elapsed time shows the phase is alive.
Without an open console, or in one opened with `bars=False` (ranks other than 0), bars are
silent. Everything is put back when the console closes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from tqdm import tqdm

__all__ = ["LEVELS", "LINE_EVERY_S", "Console", "activity", "bar", "doing", "showing"]

LEVELS = ("", "DEBUG", "INFO", "WARNING", "ERROR")
LINE_EVERY_S = 30.0  # a plain line at most this often, and at least while a phase lasts
REDRAW_EVERY_S = 1.0  # a bar on a terminal is drawn again at least this often
TAIL_LINES = 20  # the lines of a removed log that are shown on the terminal
#: the bars' clock (their intervals, redraws and elapsed times): tqdm's, so that a tqdm monitor
#: thread that other bars started agrees with them; tests give the bars one they move by hand
clock = time.time

#: what the bars made now are about, with their unit
activity: ContextVar[tuple[str, str]] = ContextVar("activity", default=("", "sample"))

_open: list[Console] = []  # the consoles open now, innermost last

# loggers that bring handlers of their own, which write to the streams of the time
_OWN_HANDLERS = ("vllm", "transformers")


@contextmanager
def doing(label: str, unit: str = "sample"):
    """The bars made inside are about `label`, counting `unit`s."""
    token = activity.set((label, unit))
    try:
        yield
    finally:
        activity.reset(token)


def showing() -> bool:
    """Whether bars show now (a console with bars is open)."""
    return bool(_open) and _open[-1].bars


def bar(total: int | None, unit: str | None = None) -> tqdm:
    """A progress bar of `total` units labelled with the current `activity` (see the module
    doc); silent where no console shows bars. Use it as a context manager, or close it."""
    label, default_unit = activity.get()
    unit = unit or default_unit
    if not showing():
        return tqdm(total=total, disable=True)
    stream = _open[-1].err
    if stream.isatty():
        return _Bar(
            total=total,
            desc=label,
            unit=unit,
            file=stream,
            leave=False,
            dynamic_ncols=True,
            beat=REDRAW_EVERY_S,
        )
    every = LINE_EVERY_S
    return _Lines(
        total=total,
        desc=label,
        unit=unit,
        file=stream,
        leave=False,  # its last line is written by `close`
        delay=every,
        mininterval=every,
        maxinterval=every,
        beat=every,
        bar_format="{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]{postfix}",
    )


class _Bar(tqdm):
    """A tqdm bar that is drawn again when it has not been for `beat` seconds, also while
    nothing finishes: a batch of vLLM requests can run for minutes before its first one ends,
    and the elapsed time that moves on is then the sign of life (tqdm draws on updates only).
    A thread of its own calls `heartbeat` several times a `beat` until the bar closes. All its
    timing, tqdm's included, reads `clock`."""

    monitor_interval = 0  # tqdm's monitor thread: the heartbeat draws stale bars instead

    def __init__(self, *args, beat: float, **kwargs):
        self.beat = beat
        self.clock = clock
        self.begun = self.drawn = self.clock()
        self.stopped = threading.Event()
        self.beating: threading.Thread | None = None
        super().__init__(*args, **kwargs)
        self._time = self.clock  # tqdm's elapsed time, rate, delay and intervals
        self.start_t = self.last_print_t = self.begun
        if beat > 0 and not self.disable:
            self.beating = threading.Thread(target=self._beat, daemon=True)
            self.beating.start()

    def display(self, msg=None, pos=None):
        self.drawn = self.clock()
        return super().display(msg, pos)

    def heartbeat(self) -> None:
        """Draw the bar again if it has not been drawn for `beat` seconds."""
        if self.clock() - self.drawn >= self.beat:
            self.refresh()

    def _beat(self) -> None:
        while not self.stopped.wait(self.beat / 4):
            self.heartbeat()

    def close(self):
        self.stopped.set()
        if self.beating is not None:
            self.beating.join()  # no redraw after the close
        super().close()


class _Lines(_Bar):
    """A bar for a stream that is no terminal: each display a whole line (none that repeats
    the last one within `beat` seconds), none to clear, and a last line at the close with the
    final count when any was written."""

    shown: int | None = None  # the count of its last line

    def display(self, msg=None, pos=None):
        if msg is not None:  # a request to clear the line, which a plain line never needs
            return False
        if self.shown is None and self.clock() - self.begun < self.beat:
            return False  # a phase shorter than a line's interval needs none (vLLM refreshes)
        if self.n == self.shown and self.clock() - self.drawn < self.beat:
            return False  # the line just written says it (a refresh after an update)
        self.fp.write(f"{self}\n")
        self.fp.flush()
        self.drawn, self.shown = self.clock(), self.n
        return True

    def close(self):
        self.stopped.set()
        if not self.disable and self.shown is not None and self.n != self.shown:
            self.display()
        super().close()


class _Terminal(logging.Filter):
    """The records the terminal shows: the project's from WARNING, the libraries' from
    `level` (none when it is None)."""

    def __init__(self, level: int | None):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "selfplay" or record.name.startswith("selfplay."):
            return record.levelno >= logging.WARNING
        return self.level is not None and record.levelno >= self.level


class Console:
    """Opened with `with Console(log_file, level):` (see the module doc). `log=None` opens a
    console that only shows bars and leaves every output where it was."""

    def __init__(self, log: Path | None, level: str = "", bars: bool = True):
        if level not in LEVELS:
            raise ValueError(f"log level {level!r}: choose from {', '.join(LEVELS[1:])} or ''")
        self.log = Path(log) if log is not None else None
        self.level = level
        self.bars = bars
        self.out, self.err = sys.stdout, sys.stderr

    def __enter__(self) -> Console:
        if self.log is not None:
            self._capture()
        _open.append(self)
        return self

    def __exit__(self, kind, error, trace) -> None:
        _open.remove(self)
        if self.log is None:
            return
        if error is not None and self._log_alone():
            self._show_tail()
            self._release()
            self._remove()
            error.add_note(
                f"({self.log.parent} held only the libraries' log, shown above: both are removed)"
            )
            return
        if isinstance(error, Exception):
            self._file.stream.write("".join(traceback.format_exception(error)))
            error.add_note(f"(the libraries' log up to this error: {self.log})")
        self._release()

    # -- a failure that wrote nothing but the log -----------------------------------------------

    def _log_alone(self) -> bool:
        """Whether the console made the log's folder and it holds nothing but the log."""
        folder = self.log.parent
        return self._made is not None and [p.name for p in folder.iterdir()] == [self.log.name]

    def _show_tail(self) -> None:
        self._file.flush()
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        if not any(line.strip() for line in lines):
            self.err.write(f"(the libraries' log {self.log} is empty)\n")
            return
        shown = lines[-TAIL_LINES:]
        part = "" if len(shown) == len(lines) else f", its last {len(shown)} of {len(lines)} lines"
        self.err.write(f"the libraries' log {self.log}{part}:\n")
        self.err.write("".join(f"  {line}\n" for line in shown))

    def _remove(self) -> None:
        """The log, then its folder and those above it up to the first the console made."""
        self.log.unlink()
        for folder in (self.log.parent, *self.log.parent.parents):
            try:
                folder.rmdir()
            except OSError:  # something else appeared in it meanwhile
                return
            if folder == self._made:
                return

    # -- capture --------------------------------------------------------------------------------

    def _capture(self) -> None:
        # what can fail comes before the redirection, so that a failure leaves nothing changed;
        # transformers sets up its handler now, on the streams of before the console, which it
        # gets back when the console closes
        missing = [f for f in (self.log.parent, *self.log.parent.parents) if not f.exists()]
        self._made = missing[-1] if missing else None  # the outermost folder the console makes
        self.log.parent.mkdir(parents=True, exist_ok=True)
        _configure_libraries()
        logfd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        self._saved_fds = (os.dup(1), os.dup(2))
        self._saved_streams = (sys.stdout, sys.stderr)
        self.out = _terminal(sys.stdout, 1)
        self.err = _terminal(sys.stderr, 2)
        os.dup2(logfd, 1)
        os.dup2(logfd, 2)
        os.close(logfd)
        sys.stdout, sys.stderr = self.out, self.err
        self._saved_env = os.environ.get("VLLM_CONFIGURE_LOGGING")
        os.environ["VLLM_CONFIGURE_LOGGING"] = "0"
        # an engine started before cached vLLM's environment (older versions do not cache it)
        envs = sys.modules.get("vllm.envs")
        if (forget := getattr(envs, "disable_envs_cache", None)) is not None:
            forget()
        self._capture_logging()

    def _capture_logging(self) -> None:
        root = logging.getLogger()
        floor = logging.DEBUG if self.level == "DEBUG" else logging.INFO
        self._file = logging.FileHandler(self.log, encoding="utf-8")
        self._file.setLevel(floor)
        self._file.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
        self._shown = logging.StreamHandler(self.err)
        self._shown.addFilter(_Terminal(logging.getLevelName(self.level) if self.level else None))
        self._root_level = root.level
        root.setLevel(min(floor, root.level) if root.level else floor)
        root.addHandler(self._file)
        root.addHandler(self._shown)
        self._own = {}
        for name in _OWN_HANDLERS:
            logger = logging.getLogger(name)
            self._own[name] = (list(logger.handlers), logger.propagate)
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.propagate = True
        logging.captureWarnings(True)
        self._transformers_bars = _transformers_bars(False)

    def _release(self) -> None:
        logging.captureWarnings(False)
        _transformers_bars(self._transformers_bars)
        for name, (handlers, propagate) in self._own.items():
            logger = logging.getLogger(name)
            for handler in handlers:
                logger.addHandler(handler)
            logger.propagate = propagate
        root = logging.getLogger()
        root.removeHandler(self._file)
        root.removeHandler(self._shown)
        root.setLevel(self._root_level)
        self._file.close()
        if self._saved_env is None:
            os.environ.pop("VLLM_CONFIGURE_LOGGING", None)
        else:
            os.environ["VLLM_CONFIGURE_LOGGING"] = self._saved_env
        for stream in (self.out, self.err):
            stream.flush()
        sys.stdout, sys.stderr = self._saved_streams
        for fd, saved in zip((1, 2), self._saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        for stream, before in zip((self.out, self.err), self._saved_streams):
            if stream is not before:
                stream.close()


def _terminal(stream, fd: int):
    """Where `stream` (`sys.stdout` on descriptor 1, `sys.stderr` on 2) writes while the console
    sends descriptor `fd` to the log: `stream` itself, unless it writes to `fd`; then a
    line-buffered stream on a copy of `fd`, in `stream`'s encoding."""
    try:
        own = stream.fileno() == fd
    except (AttributeError, OSError, ValueError):  # a StringIO, a notebook's stream
        own = False
    if not own:
        return stream
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return open(os.dup(fd), "w", buffering=1, encoding=encoding, errors="backslashreplace")  # noqa: SIM115


def _configure_libraries() -> None:
    """Have transformers set up its logger now (it adds its own handler the first time it
    logs), so that the console takes that handler away rather than meet it later."""
    from transformers.utils import logging as hf_logging

    hf_logging.get_logger("transformers")


def _transformers_bars(on: bool) -> bool:
    """Turn transformers' progress bars (model loading, downloads) on or off; whether they
    were on. They write to `sys.stderr` of the moment, which is the terminal in a console."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if on:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()
    return was


def add_verbose(parser) -> None:
    """A command's `--verbose` flag (see `verbose_overrides`)."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the libraries' log (vLLM, transformers, torch) on the terminal too, from INFO",
    )


def verbose_overrides(args) -> list[str]:
    """The command's configuration overrides, with `run.log_level=INFO` first where `--verbose`
    asks for the libraries' log on the terminal (an explicit `run.log_level=...` wins)."""
    overrides = list(args.overrides or ())
    return ["run.log_level=INFO", *overrides] if args.verbose else overrides
