import pytest

from slurm_green.slurm import gres


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("gres/gpu:2", "gpu", (2, None)),  # 24.11+ tres_per_node
        ("gres:gpu:2", "gpu", (2, None)),  # 22.05 tres_per_node
        ("gres/gpu:a100:2", "gpu", (2, "a100")),
        ("gres/gpu=2", "gpu", (2, None)),
        ("gres:gpu:a100:4(IDX:0-3)", "gpu", (4, "a100")),
        ("gpu:a100:4(S:0)", "gpu", (4, "a100")),
        ("gpu:a100:4(S:0-1),shard:a100:16(S:0-1)", "shard", (16, "a100")),
        ("gres/gpu", "gpu", (1, None)),
        ("gres/shard:4", "shard", (4, None)),
        ("gres/shard:4", "gpu", (0, None)),
        ("cpu=1,mem=4000M,node=1,billing=1,gres/gpu=2", "gpu", (2, None)),
        # tres_req_str lists the untyped total and the typed part: count once
        ("cpu=1,gres/gpu=2,gres/gpu:a100=2", "gpu", (2, "a100")),
        ("gres/gpu:a100:1,gres/gpu:v100:2", "gpu", (3, "a100")),
        ("", "gpu", (0, None)),
        (None, "gpu", (0, None)),
        ("(null)", "gpu", (0, None)),
    ],
)
def test_count(text, name, expected):
    assert gres.count(text, name) == expected


def test_used_string_with_shard_detail():
    used = "gpu:a100:2(IDX:0-1),shard:a100:4(0/4,0/4,4/4,0/4)"
    assert gres.count(used, "gpu") == (2, "a100")
    assert gres.count(used, "shard") == (4, "a100")
    assert gres.used_indices(used) == (0, 1)


@pytest.mark.parametrize(
    ("used", "indices"),
    [
        ("gpu:a100:0(IDX:N/A),shard:a100:0(0/4,0/4,0/4,0/4)", ()),
        ("gpu:a100:3(IDX:0,2-3)", (0, 2, 3)),
        ("gpu:1(IDX:3),gpu:v100:1(IDX:0)", (0, 3)),
        ("", ()),
    ],
)
def test_used_indices(used, indices):
    assert gres.used_indices(used) == indices


def test_split_keeps_parentheses_whole():
    assert gres.split_top_level("gpu:2(S:0,1),shard:0(0/4,0/4)") == ["gpu:2(S:0,1)", "shard:0(0/4,0/4)"]
