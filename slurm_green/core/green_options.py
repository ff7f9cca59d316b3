"""A job's green options: what the user asked for, and the trusted copy the site keeps.

Users opt in or out with a standard sbatch flag, ``--comment``::

    --comment "green:flex=6h,gpus=2-8,cap=yes,share=no"
    --comment "green:elastic=requeue,gpus=1-4"
    --comment "green:off"

``elastic=requeue`` lets the controller checkpoint-and-requeue a running job at another
GPU count within its ``gpus`` range (``elastic=no``, the default: never).

``job_submit.lua`` validates that text at submission (it mirrors ``parse_user_options``)
and writes a normalised *marker* into the job's AdminComment, which neither users nor
Slurm operators can change. The controller trusts only the marker: anything users
write into ``--comment`` later is ignored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

USER_PREFIX = "green:"
MARKER_PREFIX = "sg:"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$", re.ASCII)
_UNIT_S = {"": 3600.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_YES = {"yes", "y", "1", "true", "on"}
_NO = {"no", "n", "0", "false", "off"}


class GreenOptionError(ValueError):
    """The user's green options are malformed; the message says what is allowed."""


@dataclass(frozen=True, slots=True)
class GreenOptions:
    managed: bool = True
    max_delay_s: float = 0.0
    gpus_min: int | None = None
    gpus_max: int | None = None
    accept_cap: bool = True
    accept_share: bool = False
    deadline: float | None = None
    elastic: bool = False
    #: The time limit the job was submitted with (``--time``), seconds; None: none given (the
    #: partition's default applies). The job's runtime as asked: a decision that slows the job
    #: raises its limit from this, never from a limit the controller raised (``controller/planner.py``).
    time_limit_s: float | None = None
    #: The user's own ``--begin`` (epoch seconds) when later than the submission: the job's
    #: earliest start, which no decision moves earlier (flex counts from it). None: none given.
    earliest: float | None = None
    #: The user chose or narrowed the job's nodes at submission (``-w``, ``-x``, ``-C`` or
    #: ``--reservation``): where it runs is theirs, so no decision pins it, clears its node list
    #: or changes its size while it waits (what fits on the nodes they named is theirs to know);
    #: its start and cap are decided, and once it runs an elastic one is resized in place
    #: (``running_gpu_bounds``).
    own_nodes: bool = False
    #: Submitted as a job array (``--array``): the controller sees its pending tasks as one
    #: record, so one pin or size would hold every task to one decision's nodes; its start and
    #: cap are decided.
    array: bool = False
    #: The task count its user gave (``-n``); None: none given. A job is never given more nodes
    #: than tasks: Slurm takes such an update and leaves the job pending (``Reason=Resources``)
    #: on an idle cluster, where without ``-n`` it spreads the job's one task list over them.
    tasks: int | None = None

    @property
    def shape_fixed(self) -> bool:
        """Whether decisions may set only the pending job's start and cap, never its nodes nor
        its size: its user chose its nodes (``own_nodes``), or it is an array (``array``)."""
        return self.own_nodes or self.array

    def gpu_bounds(self, requested: int) -> tuple[int, int]:
        """The GPU counts a policy may give the job while it waits: the user's range
        (``gpus=MIN-MAX``; where a bound was not given, the job's own ``requested`` count), or
        only ``requested`` where its shape stays as submitted (``shape_fixed``): a policy places
        a pending job without knowing the nodes its user named, so no size it picks is known to
        fit there. One rule for every policy: a job that gave no range is never resized."""
        if self.shape_fixed:
            return requested, requested
        return self._user_range(requested)

    def running_gpu_bounds(self, running: int) -> tuple[int, int]:
        """The GPU counts a running elastic job may be resized to, in place, by checkpoint and
        requeue: the user's range, also for a job whose user chose its nodes (``own_nodes``),
        as the resizer grows or shrinks a job only on the node it runs on, one their ``-w``,
        ``-x``, ``-C`` or reservation allowed, and sets no node list (Slurm keeps theirs on the
        requeued job). An array's task keeps its size (``array``): untried, so not assumed."""
        if self.array:
            return running, running
        return self._user_range(running)

    def _user_range(self, count: int) -> tuple[int, int]:
        return (self.gpus_min if self.gpus_min is not None else count,
                self.gpus_max if self.gpus_max is not None else count)


#: The most GPUs a user may name (``gpus=MIN-MAX``): far above any job's, and far below what
#: would overflow the policies' integer arrays (a 20-digit count stopped every tick).
MAX_GPUS = 1_000_000


def parse_duration(text: str) -> float:
    """``90m``, ``6h``, ``1.5d``, ``3600s``; a bare number is hours."""
    match = _DURATION.match(text.strip().lower())
    if not match:
        raise GreenOptionError(f"flex={text!r}: expected a non-negative duration such as 30m, 6h or 1d")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def _parse_bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise GreenOptionError(f"{key}={text!r}: expected yes or no")


def _parse_gpu_range(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", text.strip(), re.ASCII)
    if not match:
        raise GreenOptionError(f"gpus={text!r}: expected a count or a range such as 2-8")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if low < 1 or high < low:
        raise GreenOptionError(f"gpus={text!r}: expected 1 <= MIN <= MAX")
    if high > MAX_GPUS:
        raise GreenOptionError(f"gpus={text!r}: at most {MAX_GPUS} GPUs")
    return low, high


KEYS = ("flex", "gpus", "cap", "share", "elastic")
_KEY_LIST = ", ".join(KEYS)
ELASTIC_YES = "requeue"


def _parse_elastic(text: str) -> bool:
    value = text.strip().lower()
    if value == ELASTIC_YES:
        return True
    if value in _NO:
        return False
    raise GreenOptionError(f"elastic={text!r}: expected requeue or no")


def _names_a_key(word: str) -> bool:
    """Whether a word holds a ``KEY=VALUE`` item of ours (``gpus=2``, ``,cap=no``)."""
    for item in word.split(","):
        key, sep, _ = item.partition("=")
        if sep and key.strip().lower() in KEYS:
            return True
    return False


def find_user_options(comment: str) -> str | None:
    """The text of the comment's ``green:`` word, if any (the rest of the comment is the user's own).

    Options spread over several words are refused rather than read in part: in
    ``green:flex=6h gpus=2`` the ``gpus=2`` would otherwise be dropped without a word, and
    so would a second ``green:`` word."""
    words = comment.split()
    found = [index for index, word in enumerate(words) if word.lower().startswith(USER_PREFIX)]
    if not found:
        return None
    if len(found) > 1:
        raise GreenOptionError(f"{len(found)} 'green:' words: give every option in one, joined by commas")
    for index, word in enumerate(words):
        if index != found[0] and _names_a_key(word):
            raise GreenOptionError(f"{word!r} is outside the green: word: join options with commas, no spaces")
    return words[found[0]][len(USER_PREFIX):]


def parse_user_options(text: str, max_delay_limit_s: float) -> GreenOptions:
    """Parse the text after ``green:``; ``off`` opts out. Keys: flex, gpus, cap, share, elastic, each once."""
    text = text.strip()
    if text.lower() in _NO:
        return GreenOptions(managed=False)
    options = GreenOptions()
    seen: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep and key in ("on", "yes"):
            continue
        if not sep:
            raise GreenOptionError(f"{item!r}: expected KEY=VALUE with KEY one of {_KEY_LIST}")
        if key in seen:
            raise GreenOptionError(f"{key!r} given twice: give each of {_KEY_LIST} at most once")
        seen.add(key)
        if key == "flex":
            delay = parse_duration(value)
            if delay > max_delay_limit_s:
                raise GreenOptionError(f"flex={value}: this site allows at most {max_delay_limit_s / 3600:g}h")
            options = replace(options, max_delay_s=delay)
        elif key == "gpus":
            low, high = _parse_gpu_range(value)
            options = replace(options, gpus_min=low, gpus_max=high)
        elif key == "cap":
            options = replace(options, accept_cap=_parse_bool(key, value))
        elif key == "share":
            options = replace(options, accept_share=_parse_bool(key, value))
        elif key == "elastic":
            options = replace(options, elastic=_parse_elastic(value))
        else:
            raise GreenOptionError(f"unknown key {key!r}: allowed are {_KEY_LIST}")
    return options


def format_marker(options: GreenOptions) -> str:
    """The trusted marker job_submit.lua writes into AdminComment (same format).

    ``elastic=1`` is written only for an elastic job, ``limit=`` only for a job submitted
    with a time limit, ``begin=`` only for one submitted with a later ``--begin`` and
    ``own_nodes=1`` only for one submitted with ``-w``, ``-x``, ``-C`` or ``--reservation`` and
    ``array=1`` only for an array, so that every other marker is the same text as before the
    options existed."""
    fields = [
        f"managed={int(options.managed)}",
        f"flex={int(options.max_delay_s)}",
        f"cap={int(options.accept_cap)}",
        f"share={int(options.accept_share)}",
    ]
    if options.gpus_min is not None:
        fields.append(f"gmin={options.gpus_min}")
        fields.append(f"gmax={options.gpus_max}")
    if options.deadline is not None:
        fields.append(f"deadline={int(options.deadline)}")
    if options.elastic:
        fields.append("elastic=1")
    if options.time_limit_s is not None:
        fields.append(f"limit={int(options.time_limit_s)}")
    if options.earliest is not None:
        fields.append(f"begin={int(options.earliest)}")
    if options.own_nodes:
        fields.append("own_nodes=1")
    if options.array:
        fields.append("array=1")
    if options.tasks is not None:
        fields.append(f"tasks={options.tasks}")
    return MARKER_PREFIX + ";".join(fields)


NO_VAL = 0xFFFFFFFE  # Slurm's "unset" for a uint32 job_desc field such as time_limit


def submitted_limit_s(minutes: int | None) -> float | None:
    """The limit job_submit.lua records from a submission's ``time_limit`` (minutes): None when
    none was given (``NO_VAL``, or nil) or it is UNLIMITED (``INFINITE``, NO_VAL + 1)."""
    return minutes * 60.0 if minutes is not None and 0 < minutes < NO_VAL else None


def on_arrival(options: GreenOptions, now: float, begin: float | None = None,
               requeue: int | None = None, time_limit_s: float | None = None,
               own_nodes: bool = False, array: bool = False,
               reserved: bool = False, tasks: int | None = None) -> tuple[GreenOptions, int | None]:
    """job_submit.lua's rule for a submitted job (``on_submit``, not in dry-run): its options
    with their deadline, and the begin time it is deferred to (``None``: not deferred).

    Flex counts from the user's own ``--begin`` when that is later than ``now``, else from
    ``now``, and that ``--begin`` is kept as the job's earliest start (``earliest``: the
    policies leave the job alone until then); a managed job is deferred to its deadline
    (whole seconds) so that it still starts by then when no controller releases it. The simulator's job_submit.lua is this function,
    and the Lua is tested against it (tests/unit/job_submit), so the two cannot drift.

    ``requeue`` is the job's Slurm requeue field as submitted (0: the user's ``--no-requeue``;
    1: ``--requeue``; ``None`` or ``NO_VAL16``: unset). An elastic job submitted with
    ``--no-requeue`` is taken as not elastic: the user's choice stands, and the controller
    could not requeue it anyway (the plugin tells the user so). Any other elastic job is
    made requeueable by the plugin (``requeue = 1``; see ``plugin_requeue``).

    ``time_limit_s`` is the limit the job was submitted with (``submitted_limit_s``), recorded
    in the options (the marker) for every marked job; so are ``own_nodes``, whether it was
    submitted with a node list, excluded nodes, a constraint or a reservation, and ``array``,
    whether it was submitted as an array, and ``tasks``, the task count its user gave
    (``num_tasks``; None where not, or ``NO_VAL``). A job submitted to a reservation (``reserved``:
    ``--reservation``) is not deferred: its reservation's nodes wait for it, and a begin time
    past the reservation's end would get it held when the reservation ends (``RESV_DEL_HOLD``).
    """
    # One ``replace`` per job: the simulator's job_submit.lua runs this for every arrival.
    elastic = options.elastic and requeue != 0
    tasks = tasks if tasks is not None and 0 < tasks < NO_VAL else None
    if not options.managed:
        return (replace(options, time_limit_s=time_limit_s, elastic=elastic, own_nodes=own_nodes, array=array,
                        tasks=tasks), None)
    later = begin is not None and now < begin < NO_VAL
    base = begin if later and begin is not None else now
    deadline = base + options.max_delay_s
    defer = math.floor(deadline)
    return (replace(options, time_limit_s=time_limit_s, elastic=elastic, deadline=deadline,
                    earliest=base if later else None, own_nodes=own_nodes, array=array, tasks=tasks),
            defer if defer > base and not reserved else None)



NO_VAL16 = 0xFFFE  # Slurm's "unset" for a uint16 job_desc field such as requeue


def plugin_requeue(options: GreenOptions, requeue: int | None) -> int | None:
    """The requeue field job_submit.lua leaves for a job with these options (``on_arrival``'s
    result; not in dry-run): 1 for an elastic job, so that a site with ``JobRequeue=0`` does
    not refuse the controller's requeue; otherwise the field as submitted."""
    return 1 if options.elastic else requeue


def _limit(text: str | None) -> float | None:
    """A marker's ``limit=``: whole seconds above 0, else none."""
    seconds = float(text) if text is not None else math.nan
    return seconds if math.isfinite(seconds) and seconds > 0 else None


@lru_cache(maxsize=1 << 17)
def parse_marker(admin_comment: str) -> GreenOptions | None:
    """The options job_submit.lua recorded, or ``None`` for a job it did not mark.

    Cached: a job's marker never changes and is read at every tick, by the policy and the
    planner alike (the options are immutable, so sharing one object is safe)."""
    for word in admin_comment.split():
        if word.startswith(MARKER_PREFIX):
            break
    else:
        return None
    values: dict[str, str] = {}
    for item in word[len(MARKER_PREFIX):].split(";"):
        key, _, value = item.partition("=")
        values[key] = value
    try:
        options = GreenOptions(
            managed=values.get("managed", "1") == "1",
            max_delay_s=float(values.get("flex", 0)),
            gpus_min=int(values["gmin"]) if "gmin" in values else None,
            gpus_max=int(values["gmax"]) if "gmax" in values else None,
            accept_cap=values.get("cap", "1") == "1",
            accept_share=values.get("share", "0") == "1",
            deadline=float(values["deadline"]) if "deadline" in values else None,
            elastic=values.get("elastic", "0") == "1",
            time_limit_s=_limit(values.get("limit")),
            earliest=float(values["begin"]) if "begin" in values else None,
            own_nodes=values.get("own_nodes", "0") == "1",
            array=values.get("array", "0") == "1",
            tasks=int(values["tasks"]) if "tasks" in values else None,
        )
    except ValueError:
        return None
    if options.tasks is not None and options.tasks < 1:
        return None
    # Written before counts were bounded: such a job is left to Slurm rather than stop every tick.
    if any(count is not None and not 1 <= count <= MAX_GPUS for count in (options.gpus_min, options.gpus_max)):
        return None
    return options
