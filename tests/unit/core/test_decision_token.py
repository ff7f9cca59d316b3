import os
from pathlib import Path

import pytest

from slurm_green.core import decision_token as dt

KEY = b"k" * 32


def test_sign_verify_round_trip():
    token = dt.sign(KEY, 42, {"cap": 0.7})
    assert dt.verify(KEY, 42, token) == {"cap": 0.7}


def test_token_for_another_job_is_refused():
    token = dt.sign(KEY, 42, {"cap": 0.7})
    with pytest.raises(dt.InvalidToken, match="job 43"):
        dt.verify(KEY, 43, token)


def test_token_with_other_key_is_refused():
    token = dt.sign(b"x" * 32, 42, {"cap": 1.0})
    with pytest.raises(dt.InvalidToken):
        dt.verify(KEY, 42, token)


def test_tampered_payload_is_refused():
    token = dt.sign(KEY, 42, {"cap": 0.5})
    forged_body = dt.sign(KEY, 42, {"cap": 1.0}).split(".")[1]
    prefix, _, mac = token.split(".")
    with pytest.raises(dt.InvalidToken):
        dt.verify(KEY, 42, f"{prefix}.{forged_body}.{mac}")


@pytest.mark.parametrize("garbage", ["", "sg1.", "sg1.abc.def", "hello"])
def test_malformed(garbage):
    with pytest.raises(dt.InvalidToken, match="malformed"):
        dt.verify(KEY, 1, garbage)


def test_find_and_replace_keep_users_words():
    first = dt.sign(KEY, 7, {"cap": 0.6})
    second = dt.sign(KEY, 7, {"cap": 0.8})
    comment = dt.replace_token("green:flex=2h my notes", first)
    assert dt.find_token(comment) == first
    comment = dt.replace_token(comment, second)
    assert comment == f"green:flex=2h my notes {second}"
    assert dt.find_token(comment) == second


def test_short_key_is_refused(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"short\n")
    path.chmod(0o600)
    with pytest.raises(ValueError, match="shorter than 16"):
        dt.load_key(path)


@pytest.mark.parametrize(("mode", "refused"), [(0o400, False), (0o440, False), (0o640, False), (0o644, True),
                                               (0o602, True)])
def test_a_key_every_user_may_read_or_change_is_refused(tmp_path, mode, refused):
    """Any user could sign the caps the Prolog applies: the controller sends none, the Prolog
    applies the site default (both catch the ValueError)."""
    path = tmp_path / "key"
    path.write_bytes(b"k" * 32)
    path.chmod(mode)
    if refused:
        with pytest.raises(ValueError, match=f"open to every user .mode {mode:04o}."):
            dt.load_key(path)
    else:
        assert dt.load_key(path) == b"k" * 32


@pytest.mark.timeout(20)
def test_a_fifo_a_device_or_a_large_file_as_key_is_refused_at_once(tmp_path):
    """Read from a FIFO the key would block the controller's start and every Prolog; /dev/zero would
    be read for ever. Both callers catch OSError and ValueError (no key: the site default cap)."""
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo, 0o600)
    large = tmp_path / "large.key"
    large.write_bytes(b"k" * 5000)
    large.chmod(0o600)
    with pytest.raises(OSError, match="not a regular file"):
        dt.load_key(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        dt.load_key(Path("/dev/zero"))
    with pytest.raises(ValueError, match="larger than 4096 bytes"):
        dt.load_key(large)


def test_the_mode_checked_is_the_opened_files(tmp_path):
    """A link to a key every user may read is refused like the key itself: the mode is read off
    the file opened, not the path."""
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(key)
    with pytest.raises(ValueError, match="open to every user"):
        dt.load_key(link)
