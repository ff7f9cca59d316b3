import json

import pytest
from slurm_captured import fixture_versions, sdiag_output

from slurm_green.slurm import sdiag

TEXT = """*******************************************************
sdiag output at Sun Nov 22 05:10:40 2026 (1795324240)
Server thread count:  1

Remote Procedure Call statistics by message type
\tREQUEST_PING                            ( 1008) count:36     ave_time:82     total_time:2976
\tREQUEST_PARTITION_INFO                  ( 2009) count:25     ave_time:123    total_time:3081
\tREQUEST_JOB_INFO                        ( 2003) count:11     ave_time:164    total_time:1814

Remote Procedure Call statistics by user
\troot            (       0) count:70     ave_time:120    total_time:8400
\tsgreen          (    2000) count:2      ave_time:100    total_time:200

Pending RPC statistics
\tNo pending RPCs
"""


def test_text_sections():
    counts = sdiag.rpc_counts(TEXT)
    assert counts.by_type == {"REQUEST_PING": 36, "REQUEST_PARTITION_INFO": 25, "REQUEST_JOB_INFO": 11}
    assert counts.by_user == {"root": 70, "sgreen": 2}
    assert counts.time_us_by_type == {"REQUEST_PING": 2976, "REQUEST_PARTITION_INFO": 3081, "REQUEST_JOB_INFO": 1814}


def test_difference_counts_new_names_from_zero():
    assert sdiag.difference({"a": 3, "b": 1}, {"a": 5, "b": 1, "c": 2}) == {"a": 2, "c": 2}


@pytest.mark.parametrize("version", fixture_versions())
def test_captured_sdiag(version):
    output = sdiag_output(version)
    counts = sdiag.rpc_counts(output)
    assert counts.by_type["REQUEST_JOB_INFO"] >= 1
    assert counts.by_user["root"] >= 1
    if output.lstrip().startswith("{"):
        raw_types = json.loads(output)["statistics"]["rpcs_by_message_type"]
        assert len(counts.by_type) == len(raw_types)
        assert sum(counts.by_user.values()) == sum(item["count"] for item in raw_types)
        assert sum(counts.time_us_by_type.values()) == sum(item["total_time"] for item in raw_types)
    else:
        section = output.split("statistics by message type")[1].split("statistics by user")[0]
        assert len(counts.by_type) == section.count("count:")
        assert len(counts.time_us_by_type) == section.count("total_time:")
