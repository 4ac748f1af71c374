"""Random restarts: frames that one solve leaves unconverged are solved again from random
coordinates within the limits, until they converge or their time budget is spent.

    starts.py   where a solve starts: the middle of the limits, random coordinates, the best of
                several random draws
    solve.py    solve_with_restarts: rounds of batched restarts under a time budget per frame
"""

from .solve import RestartResult, solve_with_restarts
from .starts import best_of_random, middle_of_limits, random_coordinates

__all__ = ["RestartResult", "solve_with_restarts", "best_of_random", "middle_of_limits", "random_coordinates"]
