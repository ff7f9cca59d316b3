import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_green.slurm.hostlist import HostlistError, expand


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("node1", ("node1",)),
        ("node[1-3,5]", ("node1", "node2", "node3", "node5")),
        ("gpu-[08-11]", ("gpu-08", "gpu-09", "gpu-10", "gpu-11")),
        ("a[1-2]b[3-4]", ("a1b3", "a1b4", "a2b3", "a2b4")),
        ("n[1-2],m7,n[9-10]-ib", ("n1", "n2", "m7", "n9-ib", "n10-ib")),
        ("node[1-2],node2", ("node1", "node2")),
        ("", ()),
        (None, ()),
        ("(null)", ()),
    ],
)
def test_expand(expression, names):
    assert expand(expression) == names


@pytest.mark.parametrize("bad", ["node[1-3", "node1-3]", "node[3-1]", "node[a-b]"])
def test_rejects_malformed(bad):
    with pytest.raises(HostlistError):
        expand(bad)


@given(st.integers(0, 500), st.integers(0, 50), st.integers(1, 4))
def test_range_has_every_number_once_with_padding(low, span, width):
    high = low + span
    names = expand(f"n[{low:0{width}d}-{high}]")
    assert len(names) == span + 1
    assert [int(name[1:]) for name in names] == list(range(low, high + 1))
    if width > len(str(low)):
        assert all(len(name) - 1 >= width for name in names)
