"""GreenFlow and PowerFlow: shortest average JCT under a carbon (or energy) budget.

After GreenFlow (TPDS 2024): each pending job gets a GPU count within its allowed
range, a power cap and a start time. The objective is the sum of the jobs' expected
completion times (wait + runtime), and the budget is priced in with a Lagrange
multiplier ``price`` (seconds of JCT per kg CO2, or per kWh for PowerFlow):

    cost(job, gpus, cap, start) = wait(start) + runtime(gpus, cap) + price * carbon(gpus, cap, start)

For one price the plan is built greedily and in bulk (numpy over jobs x GPU
options x caps x starts):

1. per job, per GPU count and start, the cap with the lowest cost;
2. a job defers, at its requested size, to its lowest-carbon window before its deadline
   if that is cheaper than starting now (never for PowerFlow: energy does not depend on
   the hour);
3. jobs starting now are admitted in FIFO order at their smallest allowed count
   (shrinking toward efficient configurations frees GPUs for the queue);
4. GPUs still free are handed out in increments (doubling a job's count), best
   JCT-saved-minus-priced-extra-carbon per extra GPU first, while that is positive:
   when carbon is cheap more increments pay off, when it is dear fewer do;
5. a job that does not start now keeps its **requested** count (at the price's cap): Slurm
   starts it between ticks the moment GPUs free, at whatever size it carries, so the
   increments that were to follow a shrink never come, and the shrunk size would be
   read back as its request at the next tick (see ``Options.queued_col``);
6. jobs admitted now get nodes (network packing, buddy blocks), see ``placement``, only
   among the nodes their partition allows, laid out in those nodes' GPUs per node
   (``Where``); one that does not fit is not started and queues at its requested size
   (``GreenFlowPolicy._enact``).

Every plan is scored by one objective (``queue_estimate._expected_cost_s``): the expected sum of the
pending jobs' completion times (admitted jobs start now, the others as GPUs free,
oldest first, running and planned jobs ending by their time limits), plus, while
jobs queue, the delay its GPU-seconds cause the jobs queued behind. With a budget
(``budget_fraction`` times the carbon of the same jobs run the carbon-agnostic way:
requested GPUs, full power, start now or queue) the candidates are the carbon-agnostic
plan itself and the greedy plan at each price of a fixed grid, each scored and budgeted as
enacted (after placement) and as queued: a plan's carbon is each job's energy at the
forecast's mean over its run where the same queue estimate runs it, not at the window it
was deferred to (jobs deferred into one trough run past it; ``queue_estimate._queued_intensity``). The
plan taken is the best on the objective among those within the budget, held no tighter
than the least carbon a candidate reaches plus ``budget_slack`` x the reference (at a budget
of at least 1 found without scoring every candidate: by lower bounds on the objective, the
same plan, see ``GreenFlowPolicy._solve``). Hence two
guarantees, per decision (not for a whole run, see docs/policies.md):
at a budget of at least 1 the plan is never worse than the carbon-agnostic one on the
objective (that plan is a candidate and fits), and a looser budget never gives a worse
expected JCT among budgets on the same side of 1 (there the candidates do not depend on
the budget, a looser one only admits more; below 1 a cap at the requested size is
exempt from the GPU-time guard, ``GreenFlowPolicy._guard``, so a budget just under 1 has more
candidates than 1 itself). With ``budget_fraction=None`` the fixed ``price`` is used, which is how a
frontier is swept.

Extension points: the runtime of a configuration comes from one function
(``options.runtime_of``); layer freezing (IceFrog) is not there (a pending job has frozen
nothing) but where running jobs are resized (``policy/running.py``); co-location is
one more candidate for the jobs a plan does not start now (``colocation``,
``policy/priced_sharing.py``): the GPU of a one-GPU job running or starting now, taken
where that costs less than the plan, carried to the Prolog by ``JobDecision.share_with``.

The package, each module importing only those listed before it:

- ``options.py``: the candidate space of one decision (``Options``: jobs x GPU columns x caps,
  two starts; ``Where``: the nodes each job may be placed on) and a plan in it (``Choice``);
- ``greedy.py``: one price -> one plan (``greedy_choice``), the grid of prices a budget is
  held over (``price_grid``), and the carbon-agnostic plan (``agnostic_choice``);
- ``queue_estimate.py``: the objective (the queue estimate, ``score``), its lower bounds, and
  the running jobs' releases it starts from (``running_releases``);
- ``policy.py``: ``GreenFlowPolicy`` (candidate space, guards, the plan taken, placement,
  decisions), ``powerflow``.
"""

from slurm_green.policy.greenflow.policy import GreenFlowPolicy, Solution, powerflow
from slurm_green.policy.greenflow.queue_estimate import running_releases

__all__ = ["GreenFlowPolicy", "Solution", "powerflow", "running_releases"]
