"""The console: the project's output on the terminal, the libraries' in the log file, and the
bars of long phases, redrawn on a terminal and plain lines elsewhere."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import warnings
from typing import get_args

import pytest

from selfplay import console
from selfplay.config import LogLevel, load
from selfplay.console import Console


def test_the_terminal_gets_the_project_s_output_the_log_everything_else(tmp_path, capfd):
    log = tmp_path / "run.log"
    with Console(log):
        print("step line")
        print("a notice", file=sys.stderr)
        logging.getLogger("selfplay.engine").warning("our own warning")
        logging.getLogger("accelerate.state").info("library info")
        logging.getLogger("vllm.v1.engine").warning("library warning")
        warnings.warn("an old API", FutureWarning, stacklevel=1)
        os.write(1, b"written to descriptor 1\n")
        os.write(2, b"written to descriptor 2\n")
        child = "import sys; print('child out'); print('child err', file=sys.stderr)"
        subprocess.run([sys.executable, "-c", child], check=True)
    out, err = capfd.readouterr()
    assert "step line" in out and "a notice" in err and "our own warning" in err
    text = log.read_text()
    for line in (
        "library info",
        "library warning",
        "an old API",
        "written to descriptor 1",
        "written to descriptor 2",
        "child out",
        "child err",
    ):
        assert line in text and line not in out + err, line


def test_transformers_hands_its_records_to_the_log(tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    logger = hf_logging.get_logger("transformers.modeling_utils")
    with Console(tmp_path / "run.log"):
        logger.warning("`use_cache=True` is incompatible")
        assert not hf_logging.is_progress_bar_enabled()
    out, err = capfd.readouterr()
    assert "use_cache" in (tmp_path / "run.log").read_text() and "use_cache" not in out + err
    assert hf_logging.is_progress_bar_enabled()  # as before the console


def test_everything_is_put_back_when_the_console_closes(tmp_path, capfd):
    root = logging.getLogger()
    before = (sys.stdout, sys.stderr, list(root.handlers), root.level)
    setting = os.environ.get("VLLM_CONFIGURE_LOGGING")
    with Console(tmp_path / "run.log"):
        assert os.environ["VLLM_CONFIGURE_LOGGING"] == "0"
    assert (sys.stdout, sys.stderr, list(root.handlers), root.level) == before
    assert os.environ.get("VLLM_CONFIGURE_LOGGING") == setting
    os.write(1, b"on the terminal again\n")
    logging.getLogger("vllm").warning("not in the log")
    assert "on the terminal again" in capfd.readouterr().out
    assert "not in the log" not in (tmp_path / "run.log").read_text()


def test_a_level_shows_the_libraries_records_from_it(tmp_path, capfd):
    with Console(tmp_path / "run.log", "WARNING"):
        logging.getLogger("vllm.worker").warning("shown warning")
        logging.getLogger("vllm.worker").info("hidden info")
    err = capfd.readouterr().err
    assert "shown warning" in err and "hidden info" not in err
    assert "hidden info" in (tmp_path / "run.log").read_text()


def test_a_crash_keeps_its_traceback_in_the_log_and_names_the_log(tmp_path):
    log = tmp_path / "run.log"
    with pytest.raises(RuntimeError) as info, Console(log):
        raise RuntimeError("the store broke")
    assert any(str(log) in note for note in info.value.__notes__)
    assert "RuntimeError: the store broke" in log.read_text()


class _Clock:
    """The bars' clock in a test: time moves only when the test moves it."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    clock = _Clock()
    monkeypatch.setattr(console, "clock", clock)
    return clock


def test_bars_are_plain_lines_where_standard_error_is_no_terminal(monkeypatch, clock):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    with Console(None), console.doing("step 1/3 solve", "answer"):
        with console.bar(4) as bar:  # shorter than a line's interval: no line
            clock.now += console.LINE_EVERY_S - 1
            bar.update(4)
            bar.refresh()  # as vLLM does when the count reaches its requests
            bar.heartbeat()  # as its thread does
        assert stream.getvalue() == ""
        monkeypatch.setattr(console, "LINE_EVERY_S", 0.0)
        with console.bar(4) as bar:
            bar.update(1)
            bar.update(3)
    lines = stream.getvalue().split("\n")
    assert "\r" not in stream.getvalue() and lines[-1] == ""
    assert lines[0].startswith("step 1/3 solve: 0/4") and lines[-2].startswith(
        "step 1/3 solve: 4/4"
    )
    assert "answer/s" in lines[-2]


def test_plain_lines_go_on_while_nothing_finishes_and_end_with_one_last_line(monkeypatch, clock):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    every = console.LINE_EVERY_S
    with Console(None), console.doing("eval cruxeval_o"), console.bar(3) as bar:
        for _ in range(3):  # a batch whose first request has not finished yet
            clock.now += every / 2
            bar.heartbeat()  # as the bar's thread does, several times an interval
            clock.now += every / 2
            bar.heartbeat()
        clock.now += 1
        bar.update(3)
        bar.refresh()  # as vLLM does when the count reaches its requests
    lines = stream.getvalue().splitlines()
    assert [line.split("<")[0] for line in lines] == [
        "eval cruxeval_o: 0/3 [00:30",
        "eval cruxeval_o: 0/3 [01:00",
        "eval cruxeval_o: 0/3 [01:30",
        "eval cruxeval_o: 3/3 [01:31",
    ], lines


def test_bars_are_redrawn_in_place_on_a_terminal(monkeypatch, clock):
    main, other = pty.openpty()
    fcntl.ioctl(other, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 x 100
    terminal = open(other, "w")  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", terminal)
    with Console(None), console.doing("eval cruxeval_o"), console.bar(3) as bar:
        bar.update(2)
        bar.refresh()  # as vLLM does
        clock.now += console.REDRAW_EVERY_S
        bar.heartbeat()  # nothing moved on for a while: drawn again, its elapsed time moved
    terminal.flush()
    shown = b""
    while select.select([main], [], [], 0.5)[0]:  # the terminal may pass it on in pieces
        shown += os.read(main, 4096)
    shown = shown.decode()
    terminal.close()
    os.close(main)
    drawn = shown.split("\r")
    assert drawn[1].startswith("eval cruxeval_o:") and "0/3" in drawn[1], drawn
    assert "2/3 [00:00<" in drawn[2] and "2/3 [00:01<" in drawn[3], drawn
    assert drawn[-2].strip() == ""  # closed: its line is cleared for the step line


def test_bars_are_silent_without_a_console_and_on_other_ranks(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(console, "LINE_EVERY_S", 0.0)
    with console.bar(2) as bar:
        bar.update(2)
    with Console(None, bars=False), console.bar(2) as bar:
        bar.update(2)
    assert stream.getvalue() == "" and not console.showing()


def test_the_transformers_backend_moves_the_bar_as_rows_finish(
    monkeypatch, tiny_model, smol_tokenizer
):
    from selfplay.engine import SamplingParams, chat
    from selfplay.engine.transformers_backend import TransformersEngine

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(console, "LINE_EVERY_S", 0.0)
    engine = TransformersEngine(tiny_model, smol_tokenizer)
    params = SamplingParams(n=2, temperature=1.0, max_tokens=6, seed=0)
    with Console(None), console.doing("eval tiny"):
        engine.generate([chat("hi"), chat("hello there")], params)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("eval tiny: 0/4") and lines[-1].startswith("eval tiny: 4/4")


def test_the_config_levels_are_the_console_s_and_verbose_asks_for_info():
    from selfplay.cli import build_parser
    from selfplay.console import verbose_overrides

    assert get_args(LogLevel) == console.LEVELS
    args = build_parser().parse_args(["run", "--verbose", "run.steps=2"])
    assert load(None, verbose_overrides(args)).run.log_level == "INFO"
    args = build_parser().parse_args(["run", "--verbose", "run.log_level=DEBUG"])
    assert load(None, verbose_overrides(args)).run.log_level == "DEBUG"
    args = build_parser().parse_args(["run"])
    assert load(None, verbose_overrides(args)).run.log_level == ""


def test_transformers_logs_to_the_terminal_after_a_console_that_set_it_up(tmp_path, capfd):
    """transformers makes its handler the first time it logs: made inside a console, it must
    not keep the console's stream, which is closed when the console closes."""
    from transformers.utils import logging as hf_logging

    hf_logging._reset_library_root_logger()  # as before transformers first logs in a process
    with Console(tmp_path / "run.log"):
        hf_logging.get_logger("transformers").info("inside")
    hf_logging.get_logger("transformers").warning("after the console")
    _, err = capfd.readouterr()
    assert "after the console" in err and "Logging error" not in err, err


def test_a_console_that_cannot_open_its_log_changes_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    streams = (sys.stdout, sys.stderr)
    with pytest.raises(OSError), Console(blocker / "run.log"):
        pass
    assert (sys.stdout, sys.stderr) == streams


def test_the_terminal_is_where_the_caller_s_streams_pointed(tmp_path, monkeypatch):
    """A caller that replaced `sys.stdout` and `sys.stderr` (a notebook, pytest's capsys, a
    program that keeps what it prints) gets the console's terminal output in them."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with Console(tmp_path / "run.log") as terminal:
        print("step line")
        print("a notice", file=sys.stderr)
        logging.getLogger("selfplay.engine").warning("our own warning")
        assert (terminal.out, terminal.err) == (out, err)
    assert (sys.stdout, sys.stderr) == (out, err) and not out.closed and not err.closed
    assert out.getvalue() == "step line\n"
    assert err.getvalue() == "a notice\nour own warning\n"


def test_a_command_s_own_streams_stay_on_its_terminal(tmp_path):
    """`sys.stdout` and `sys.stderr` on descriptors 1 and 2 (a command as it starts) keep
    writing to them as they were, while what writes to the descriptors goes to the log."""
    script = (
        "import os, sys\n"
        "from selfplay.console import Console\n"
        f"with Console({str(tmp_path / 'run.log')!r}):\n"
        "    print('step line'); print('a notice', file=sys.stderr)\n"
        "    os.write(1, b'descriptor 1\\n'); os.write(2, b'descriptor 2\\n')\n"
        "print('after')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "step line\nafter\n" and done.stderr == "a notice\n"
    assert (tmp_path / "run.log").read_text() == "descriptor 1\ndescriptor 2\n"


def test_a_failure_removes_the_folder_the_console_made_for_its_log_alone(tmp_path, capsys):
    """A command that fails before it wrote anything but the log leaves no folder behind; the
    log's last lines are on the terminal instead, and a note says what became of them."""
    folder = tmp_path / "store" / "demo"
    with pytest.raises(OSError) as info, Console(folder / "run.log"):
        os.write(2, b"loading the weights\n")
        logging.getLogger("transformers").warning("no such model")
        raise OSError("smollm-x is no model name")
    assert not (tmp_path / "store").exists()
    err = capsys.readouterr().err
    assert "loading the weights" in err and "no such model" in err
    assert err.index("loading the weights") < err.index("no such model")
    assert any(f"{folder} held only" in note for note in info.value.__notes__)


def test_a_failure_keeps_a_folder_that_was_there_or_holds_more_than_the_log(tmp_path):
    there = tmp_path / "resumed"
    there.mkdir()
    with pytest.raises(RuntimeError), Console(there / "run.log"):
        raise RuntimeError("the store broke")
    assert "the store broke" in (there / "run.log").read_text()
    new = tmp_path / "new"
    with pytest.raises(RuntimeError) as info, Console(new / "run.log"):
        (new / "config.yaml").write_text("run: {}\n")
        raise RuntimeError("the engine did not start")
    assert "the engine did not start" in (new / "run.log").read_text()
    assert any(str(new / "run.log") in note for note in info.value.__notes__)
    with Console(tmp_path / "done" / "run.log"):  # a command that succeeds keeps its log
        pass
    assert (tmp_path / "done" / "run.log").exists()
