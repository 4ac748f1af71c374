"""Random restarts: frames that one solve leaves unconverged are solved again from random
coordinates within the limits, until they converge or their time budget is spent; and one query
solved by many starts racing at once.

    starts.py   where a solve starts: the middle of the limits, random coordinates, the best of
                several random draws
    solve.py    solve_with_restarts: rounds of batched restarts under a time budget per frame
    chain.py    PoseChain: one pose task on a serial revolute chain, evaluated for many starts with
                few numpy calls and preallocated arrays
    race.py     solve_racing: one query, many starts racing in one batch from the first iteration
"""

from .race import solve_racing
from .solve import RestartResult, solve_with_restarts
from .starts import best_of_random, middle_of_limits, random_coordinates

__all__ = ["RestartResult", "solve_with_restarts", "solve_racing", "best_of_random", "middle_of_limits",
           "random_coordinates"]
