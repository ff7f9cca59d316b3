from slurm_green.core.text import displayable


def test_undecodable_bytes_become_visible_escapes():
    raw = b"caf\xe9 \xff na\xc3\xafve".decode("utf-8", "surrogateescape")
    shown = displayable(raw)
    assert shown == "caf\\xe9 \\xff naïve"
    shown.encode("utf-8")  # storable and printable


def test_plain_text_is_unchanged():
    assert displayable("green:flex=6h naïve") == "green:flex=6h naïve"
