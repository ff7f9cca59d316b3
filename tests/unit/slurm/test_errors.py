import pytest

from slurm_green.core.actions import ActionError
from slurm_green.slurm.errors import classify


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("Invalid job id specified for job 999", ActionError.JOB_GONE),
        ("slurm_update error: Invalid job id specified", ActionError.JOB_GONE),
        ("Job is no longer pending execution for job 4", ActionError.NOT_PENDING),
        ("Job has already finished for job 2", ActionError.NOT_PENDING),
        ("Access/permission denied for job 7", ActionError.PERMISSION_DENIED),
        ("Invalid user id for job 2", ActionError.PERMISSION_DENIED),
        ("slurm_update error: Unable to contact slurm controller (connect failure)", ActionError.UNREACHABLE),
        ("squeue did not answer within 30s (Socket timed out)", ActionError.UNREACHABLE),
        ("Error response from daemon: No such container: slurmgreen-2411-controller", ActionError.UNREACHABLE),
        ("Invalid generic resource (gres) specification for job 5", ActionError.INVALID),
        ("Requested node configuration is not available for job 5", ActionError.INVALID),
        ("something new", ActionError.OTHER),
    ],
)
def test_classify(message, error):
    assert classify(message) is error
