from slurm_green.core.text import displayable, terminal_safe


def test_undecodable_bytes_become_visible_escapes():
    raw = b"caf\xe9 \xff na\xc3\xafve".decode("utf-8", "surrogateescape")
    shown = displayable(raw)
    assert shown == "caf\\xe9 \\xff naïve"
    shown.encode("utf-8")  # storable and printable


def test_plain_text_is_unchanged():
    assert displayable("green:flex=6h naïve") == "green:flex=6h naïve"


def test_terminal_safe_escapes_every_control_character():
    assert terminal_safe("resnet\npower cap: FORGED\r\t") == "resnet\\npower cap: FORGED\\r\\t"
    assert terminal_safe("\x1b]0;owned\x07\x1b[2J\x00\x7f\x9b\u2028") == \
        "\\x1b]0;owned\\x07\\x1b[2J\\x00\\x7f\\x9b\\u2028"
    assert terminal_safe(b"caf\xe9\n".decode("utf-8", "surrogateescape")) == "caf\\xe9\\n"
    assert terminal_safe("green:flex=6h naïve [jdoe] \\") == "green:flex=6h naïve [jdoe] \\"
    assert terminal_safe("job\u202egpj.exe\u2066") == "job\\u202egpj.exe\\u2066"  # no reversed text
